# SPDX-License-Identifier: GPL-2.0 OR MIT
# In the VM: the instructions one fi_pingpong -e msg round trip costs its
# client, by function (valgrind's callgrind; the server runs natively).
# In TCG the VM's time is about its instructions, so this count is the
# provider's cost without the run-to-run noise of a timed ping-pong.
# From the tree (stock kernel, about a minute):
#   CLANQ_EXEC_TIMEOUT=900 flock /tmp/clanq-vm.lock tests/vm/vm.sh exec \
#     /usr/bin/valgrind.bin /usr/libexec/valgrind/callgrind-amd64-linux \
#     /usr/libexec/valgrind/vgpreload_core-amd64-linux.so /usr/bin/fi_pingpong \
#     build/provider/libclanq-fi.so provider/tests/callgrind-pingpong.sh \
#     -- 'sh ./callgrind-pingpong.sh' > build/cg.txt
#   sed -n '/^=== CG/,/^=== END/p' build/cg.txt | sed '1d;$d' > build/cg.out
#   callgrind_annotate --inclusive=yes build/cg.out | grep -E 'cfi_(inject|recv|cq_read) '
# and divide by the iterations (-I below; set-up is outside those calls).
# Build the provider with CFLAGS='-O2 -gdwarf-4' for names valgrind
# 3.19 can read everywhere.
export FI_PROVIDER_PATH=$PWD VALGRIND_LIB=$PWD
n=${ITERS:-6000}
./fi_pingpong -p clanq -e msg -d clanq0 -S ${SIZE:-8} -I $n -B 47610 > srv.txt 2>&1 &
sleep 1
./valgrind.bin --tool=callgrind --callgrind-out-file=cg.out \
	./fi_pingpong -p clanq -e msg -d clanq1 -S ${SIZE:-8} -I $n -P 47610 127.0.0.1
wait
echo "=== CG $n"
cat cg.out
echo "=== END $n"
