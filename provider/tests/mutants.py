#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Mutants of the provider, to watch its tests fail: each a copy of
# provider/ with one change, built as build/mutants/<name>.so (after
# `make provider`: it links libclanq's PIC objects from build/pic). Then,
# in the debug VM:
#   cp build/provider/libclanq-fi.so build/mutants/m0-real.so
#   CLANQ_VM_KERNEL=debug CLANQ_EXEC_TIMEOUT=1500 flock /tmp/clanq-vm.lock \
#     tests/vm/vm.sh exec build/vm/bin/test_fabric /usr/bin/fi_pingpong \
#     /usr/bin/fi_info build/mutants/*.so provider/tests/run-mutants.sh \
#     -- 'sh /clanq/exec/run-mutants.sh'
# Usage: provider/tests/mutants.py .
import os, subprocess, sys, shutil, glob
root = sys.argv[1]
out = os.path.join(root, 'build/mutants')
os.makedirs(out, exist_ok=True)
M = {
 'm1-recv-lifo': ('cfi_ep.c', '\tcfi_opq_push(&ep->rq, op);\n\t/*\n\t * Muted',
   '\top->next = ep->rq.head;\n\tep->rq.head = op;\n\tif (!ep->rq.tail)\n\t\tep->rq.tail = op;\n\tep->rq.n++;\n\t/*\n\t * Muted'),
 'm2-no-cq-data-flag': ('cfi_ep.c', '\t\tif (op->hdr.flags & CFI_HF_DATA) {\n\t\t\top->flags |= FI_REMOTE_CQ_DATA;\n',
   '\t\tif (op->hdr.flags & CFI_HF_DATA) {\n'),
 'm3-trunc-as-success': ('cfi_ep.c', 'cfi_complete(ep, true, op, op->len, FI_ETRUNC, left);',
   'cfi_complete(ep, true, op, op->len, 0, left);'),
 'm4-no-shutdown-event': ('cfi_ep.c', '\tcfi_eq_push_cm(ep->eq, FI_SHUTDOWN, &ep->ep.fid, NULL, NULL, 0);\n', ''),
 'm5-short-header-iov': ('cfi_ep.c', '\top->iov[0].iov_len = sizeof(op->hdr);\n\tfor',
   '\top->iov[0].iov_len = 8;\n\tfor'),
 'm6-any-ep-type': ('cfi_core.c', '\t\tif (a->type != FI_EP_UNSPEC && a->type != FI_EP_MSG)\n\t\t\treturn -FI_ENODATA;\n', ''),
 'm7-connreq-data-lost': ('cfi_ep.c', 'fi, data, len)) {', 'fi, data, 0)) {'),
 'm8-no-mute-before-wait': ('cfi_eq.c', '\t\tcfi_before_wait(fab);\n\t\t/* events (they came', '\t\t/* events (they came'),
 # RMA, atomics, registration, sleeping
 'm9-key-names-nothing': ('cfi_mr.c', 'CLANQ_EXPORT_KEY_NAMES_REGION,', '0,'),
 'm10-atomic-result-dropped': ('cfi_rma.c', 'memcpy(r->result, &c.value, sizeof(c.value));', '(void)c.value;'),
 'm11-writedata-as-message': ('cfi_ep.c', '.flags = CFI_HF_DATA | CFI_HF_RMA, .data = data,', '.flags = CFI_HF_DATA, .data = data,'),
 'm12-no-kick': ('cfi_eq.c', '\tif (fab->kicked)\n\t\treturn;\n', '\treturn;\n'),
 'm13-read-as-write': ('cfi_rma.c', 'write ? CLANQ_RIGHT_WRITE : CLANQ_RIGHT_READ;', 'CLANQ_RIGHT_WRITE;'),
 'm14-rma-offset-ignored': ('cfi_rma.c', 'req.dst_off = q->addr - rap->first;', 'req.dst_off = 0;'),
 # counters
 'm15-cntr-failure-as-success': ('cfi_cntr.c', '\tif (failed)\n\t\tcntr->err++;\n\telse\n\t\tcntr->value++;', '\tcntr->value++;'),
 'm16-cntr-no-wake': ('cfi_cntr.c', '\tcfi_wake(cntr->fab, &cntr->armed, true);\n}\n\n/* fi_cntr_read()', '}\n\n/* fi_cntr_read()'),
 'm17-rma-uncounted': ('cfi_rma.c', '\t\t\tcfi_cntr_count(ep->cntrs[', '\t\t\tif (0) cfi_cntr_count(ep->cntrs['),
 'm18-inject-uncounted': ('cfi_ep.c', '\tcfi_cntr_count(ep->cntrs[rx ? CFI_CNTR_RECV', '\tif (comp) cfi_cntr_count(ep->cntrs[rx ? CFI_CNTR_RECV'),
 'm19-wait-ignores-errors': ('cfi_cntr.c', '\t\tif (cntr->err != err) {', '\t\tif (0) {'),
 # the atomics' iov and msg forms
 'm20-ioc-count-ignored': ('cfi_atomic.c', 'iov && count == 1 && iov[0].count == 1 && iov[0].addr', 'iov && iov[0].addr'),
 # the ring's size, small messages' straight paths, large messages' pieces
 'm21-ring-size-ignored': ('cfi_core.c', 'return (n & ~4095u) - CFI_RING_HDR;', 'return CFI_RING_DEFAULT - CFI_RING_HDR;'),
 'm22-small-recv-takes-too-much': ('cfi_ep.c', 'n = clanq_recv(ep->conn, buf, room, CLANQ_MSG_DONTWAIT);',
   'n = clanq_recv(ep->conn, buf, sizeof(buf), CLANQ_MSG_DONTWAIT);'),
 'm23-piece-out-of-place': ('cfi_ep.c', 'cfi_iov_put(op, op->done, p + sizeof(h), len);', 'cfi_iov_put(op, 0, p + sizeof(h), len);'),
 'm24-large-by-the-library': ('cfi_ep.c', '\tif (op->len <= piece)\n', '\tif (1)\n'),
 # the small send's straight path: no room must queue it, not drop it
 'm25-small-send-dropped-when-full': ('cfi_ep.c', '\t\ttried = true;\t/* no room: queued below, as any other */',
   '\t\tret = 0;\n\t\tgoto out;'),
 # rendezvous (cfi_rndv.c)
 'm26-rndv-completes-at-once': ('cfi_ep.c', '\t} else if (rndv || ep->aq.head) {', '\t} else if (0) {'),
 'm27-rndv-out-of-order': ('cfi_ep.c', '\t} else if (rndv || ep->aq.head) {', '\t} else if (rndv) {'),
 'm28-rndv-bounce-at-zero': ('cfi_rndv.c', 'cfi_iov_put(op, x->done, ep->bounce.mem, x->chunk);',
   'cfi_iov_put(op, 0, ep->bounce.mem, x->chunk);'),
 'm29-rndv-done-key-unchecked': ('cfi_rndv.c', 'if (!op || !op->reg || op->key != h->data ||', 'if (!op || !op->reg ||'),
 'm30-rndv-trunc-as-success': ('cfi_rndv.c', 'cfi_complete(ep, true, op, len, FI_ETRUNC, op->whole - op->len);',
   'cfi_complete(ep, true, op, len, 0, op->whole - op->len);'),
 'm31-rndv-never': ('cfi_core.c', '\treturn CFI_RNDV_DEFAULT;', '\treturn 0;'),
}
cflags = ['-std=gnu11', '-Wall', '-Wextra', '-Werror', '-Iinclude', '-O2', '-g', '-fPIC', '-fvisibility=hidden', '-Wno-unused']
pics = sorted(glob.glob(os.path.join(root, 'build/pic/lib/*.o')))
for name, (f, old, new) in M.items():
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(root, 'provider'), d, ignore=shutil.ignore_patterns('tests'))
    p = os.path.join(d, f)
    s = open(p).read()
    assert s.count(old) == 1, (name, s.count(old))
    open(p, 'w').write(s.replace(old, new))
    objs = []
    for c in glob.glob(os.path.join(d, '*.c')):
        o = c[:-2] + '.o'
        subprocess.check_call(['cc'] + cflags + ['-I' + os.path.join(root, 'include'), '-c', c, '-o', o])
        objs.append(o)
    so = os.path.join(out, name + '.so')
    subprocess.check_call(['cc', '-shared', '-Wl,--version-script=' + os.path.join(root, 'provider/libclanq-fi.map'),
                           '-o', so] + objs + pics + ['-lfabric', '-lpthread'])
    print('built', so)
