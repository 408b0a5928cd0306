# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# clanq: kernel driver + libclanq. `make help` lists the targets.
#
# Kernel modules are built in per-kernel copies of driver/ and tests/kunit/
# under build/mod/<kernel>/ (symlinks to the sources), so modules for the
# debug kernel, the stock kernel and the host never overwrite each other.

.DEFAULT_GOAL := all
SHELL := /bin/bash

# The one place the version is written: the pkg-config file and the DKMS
# source (make install-dkms, debian/rules' dh_dkms) take it from here, and
# debian/rules refuses a debian/changelog that says otherwise.
VERSION := 0.6
# kbuild has a VERSION of its own (the kernel's): a `make VERSION=...` must
# not reach the module builds
MAKEOVERRIDES := $(filter-out VERSION=%,$(MAKEOVERRIDES))

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR  ?= $(DATADIR)/man
# udev reads /usr/lib/udev/rules.d (and /etc/udev/rules.d), never under
# /usr/local, so the rule goes there whatever PREFIX is.
UDEVDIR ?= /usr/lib/udev/rules.d
# libfabric's provider directory: Debian's libfabric1 looks for
# lib*-fi.so in $(LIBDIR)/libfabric with no FI_PROVIDER_PATH
FABRICDIR ?= $(LIBDIR)/libfabric
# the module's source for DKMS (make install-dkms)
DKMSDIR ?= /usr/src/clanq-$(VERSION)
DESTDIR ?=

B       := build
CFLAGS  ?= -O2 -g
# CPPFLAGS and LDFLAGS: empty unless given (debian/rules passes dpkg-buildflags')
USER_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Iinclude $(CPPFLAGS) $(CFLAGS)
SAN_ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# TSan does not model fences (-Wtsan); the queue's paths it checks use none
SAN_TSAN := -O1 -g -fsanitize=thread -Wno-tsan

# every header a user-space object may include: the public ones and the
# library's own (lib/ring.h, lib/net_internal.h: white-box tests and
# clanq-bench native include them too)
HDRS     := $(wildcard include/*.h include/*/*.h lib/*.h)
LIB_SRCS := $(wildcard lib/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
LIB_PICS := $(LIB_SRCS:%.c=$(B)/pic/%.o)
LIB_A    := $(B)/lib/libclanq.a
# the soname's number: bumped when the ABI breaks (lib/libclanq.map,
# debian/libclanq<N>.symbols, tests/abi/)
SOVERSION := 2
LIB_SO   := $(B)/lib/libclanq.so.$(SOVERSION)

EXAMPLES := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))
BENCHES  := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c)) $(B)/bench/clanq-bench
# clanq-bench: one program from bench/clanq-bench/*.c
CB_SRCS  := $(wildcard bench/clanq-bench/*.c)
TOOLS    := $(patsubst tools/%.c,$(B)/tools/%,$(wildcard tools/*.c))
# test programs are tests/integration/test_*.c; the other .c files there
# (itest.c) are linked into each of them
VM_TESTS := $(patsubst tests/integration/%.c,$(B)/vm/bin/%,$(wildcard tests/integration/test_*.c))

KERNEL_SH := tests/vm/kernel.sh
HOST_KDIR := /lib/modules/$(shell uname -r)/build
# A host with its own headers builds for itself; elsewhere for Debian's stock 6.12.
KDIR ?= $(if $(wildcard $(HOST_KDIR)/Makefile),$(HOST_KDIR),$(shell $(KERNEL_SH) stock-kdir))
# build/mod/<MODNAME>/: one build directory per kernel built for
MODNAME ?= host

export CLANQ_RESULTS ?= $(CURDIR)/$(B)/results.txt

.PHONY: all lib examples benches tools provider bench module module-stock module-debug vm-bins deps \
	check native-smoke bench-native lint test pair-siw mpi run vm-shell vm-run install uninstall clean help fuzz coverage soak

all: lib examples benches tools provider module

help:
	@echo 'make            library, examples, benchmarks, module (for KDIR)'
	@echo 'make deps       install the Debian packages the project needs'
	@echo 'make run        the main job: boot the stock-kernel VM and show clanq at work, then two'
	@echo '                stock VMs wired to each other over Soft-RoCE (tests/vm/vm.sh pair-run)'
	@echo 'make bench      clanq-bench beside UCX, libfabric, Soft-RoCE, sockets (stock VM; build/bench/)'
	@echo 'make test       every test: check, lint, packages (installed here), the debug-kernel VM,'
	@echo '                the packages in the stock-kernel VM, two debug VMs wired to each other'
	@echo '                (tests/vm/vm.sh pair, over Soft-RoCE)'
	@echo 'make mpi        make test'"'"'s MPI stage alone: Open MPI jobs over the libfabric provider,'
	@echo '                stock-kernel VM (tests/vm/mpi-test.sh, a minute or two)'
	@echo 'make pair-siw   the pair stage over siw (iWARP over TCP) instead: two debug VMs (5-8 min)'
	@echo 'make check      host tests only (seconds)'
	@echo 'make bench-native  clanq-bench native: the data path on this machine'"'"'s CPUs, no VM (minutes)'
	@echo 'make lint       checkpatch --strict, sparse, W=1 module builds'
	@echo 'make vm-shell   debug-kernel VM with the module loaded, at a shell'
	@echo 'make vm-run PROG="prog ..." ARGS="command"'
	@echo '                your own programs in the stock-kernel VM, module loaded, 2 nodes:'
	@echo '                PROG copied in, ARGS (a shell command; default: the first PROG) run,'
	@echo '                its output and exit status returned (TIMEOUT=300 s; KERNEL=debug:'
	@echo '                the debug kernel, a splat fails the run; tests/vm/vm.sh exec)'
	@echo 'make fuzz       the coverage-guided fuzzer in the debug VM (FUZZ_SECONDS=600)'
	@echo 'make soak       the soaks in full (tests/vm/soak.list), debug VM: hours'
	@echo 'make coverage   line/function coverage of driver/**/*.c by the VM tests (gcov)'
	@echo 'make install    library, headers, pkg-config, programs, man pages, udev rule,'
	@echo '                the libfabric provider in FABRICDIR ($$(LIBDIR)/libfabric)'
	@echo '                (PREFIX, DESTDIR, LIBDIR, BINDIR, MANDIR, UDEVDIR, FABRICDIR)'
	@echo 'make install-dkms  the module source and dkms.conf in DKMSDIR (/usr/src/clanq-$(VERSION))'
	@echo 'make deb        Debian packages in build/deb/ (clanq-dkms, libclanq2, libclanq-dev,'
	@echo '                clanq-tools, libfabric-clanq)'

# ---- user space ------------------------------------------------------------

$(B)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -c $< -o $@

$(B)/pic/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -fPIC -fvisibility=default -c $< -o $@

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

# lib/libclanq.map: each exported function named, versioned LIBCLANQ_0.2
$(LIB_SO): $(LIB_PICS) lib/libclanq.map
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libclanq.so.$(SOVERSION) \
		-Wl,--version-script=lib/libclanq.map -o $@ $(LIB_PICS)

lib: $(LIB_A) $(LIB_SO)

# The programs link libclanq statically, so they run from the tree as
# they are; the packages link them to libclanq.so.2 (CLANQ_LINK=shared,
# debian/rules), so clanq-tools uses libclanq2 like any application.
ifeq ($(CLANQ_LINK),shared)
PROG_LIB  := $(LIB_SO)
PROG_LINK := -L$(B)/lib -l:libclanq.so.$(SOVERSION)
else
PROG_LIB  := $(LIB_A)
PROG_LINK := $(LIB_A)
endif

$(B)/examples/%: examples/%.c $(PROG_LIB) $(HDRS) $(wildcard examples/*.h bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(LDFLAGS) $< $(PROG_LINK) -lpthread -o $@

$(B)/bench/%: bench/%.c $(PROG_LIB) $(HDRS) $(wildcard bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(LDFLAGS) $< $(PROG_LINK) -lpthread -lm -o $@

$(B)/bench/clanq-bench: $(CB_SRCS) $(PROG_LIB) $(HDRS) $(wildcard bench/*.h bench/clanq-bench/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(LDFLAGS) $(CB_SRCS) $(PROG_LINK) -lpthread -lm -o $@

$(B)/tools/%: tools/%.c $(PROG_LIB) $(HDRS) $(wildcard tools/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(LDFLAGS) $< $(PROG_LINK) -lm -o $@

examples: $(EXAMPLES)
benches: $(BENCHES)
tools: $(TOOLS)

# The libfabric provider (provider/): libclanq-fi.so, libclanq's PIC
# objects linked in (no libclanq.so.2 to find when libfabric dlopens it;
# it matches the tree's module), only fi_prov_ini exported.
PROV_SRCS := $(wildcard provider/*.c)
PROV_HDRS := $(wildcard provider/*.h)
PROV_SO   := $(B)/provider/libclanq-fi.so

$(B)/provider/%.o: provider/%.c $(HDRS) $(PROV_HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(PROV_SO): $(PROV_SRCS:provider/%.c=$(B)/provider/%.o) $(LIB_PICS) provider/libclanq-fi.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=provider/libclanq-fi.map \
		-Wl,-z,defs -o $@ $(filter %.o,$^) -lfabric -lpthread

# its test program (provider/tests/), run in the debug VM
$(B)/vm/bin/test_fabric: provider/tests/test_fabric.c $(B)/vm/itest.o $(LIB_A) $(HDRS) $(ITEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -Itests/integration $< $(B)/vm/itest.o $(LIB_A) -lfabric -lcmocka -lpthread -o $@

provider: $(PROV_SO)

# an MPI job over the provider (tests/vm/mpi-test.sh), built by Open MPI's
# mpicc (openmpi-bin, libopenmpi-dev: scripts/deps.sh)
MPICC ?= mpicc
$(B)/mpi/mpi_check: provider/tests/mpi_check.c
	@mkdir -p $(@D)
	$(MPICC) -std=gnu11 -O2 -g -Wall -Wextra -Werror $< -o $@

# In-VM test programs: cmocka programs linked with libclanq.a; the harness
# copies the shared libraries they need (libc, libcmocka) into the initramfs.
ITEST_HDRS := $(wildcard tests/integration/*.h)

$(B)/vm/itest.o: tests/integration/itest.c $(HDRS) $(ITEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -c $< -o $@

$(B)/vm/bin/%: tests/integration/%.c $(B)/vm/itest.o $(LIB_A) $(HDRS) $(ITEST_HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $< $(B)/vm/itest.o $(LIB_A) -lcmocka -lpthread -o $@

# The fuzzer (tests/fuzz): static, no library; it speaks the raw ABI.
$(B)/vm/bin/clanq-fuzz: tests/fuzz/clanq-fuzz.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -static $< -o $@

vm-bins: $(VM_TESTS) $(EXAMPLES) $(BENCHES) $(TOOLS) $(B)/vm/bin/clanq-fuzz \
	$(PROV_SO) $(B)/vm/bin/test_fabric

# Host unit tests: each built twice, ASan+UBSan and TSan.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_ASAN := $(patsubst tests/unit/%.c,$(B)/unit/%-asan,$(UNIT_SRCS))
UNIT_TSAN := $(patsubst tests/unit/%.c,$(B)/unit/%-tsan,$(UNIT_SRCS))

$(B)/unit/%-asan: tests/unit/%.c $(LIB_SRCS) $(HDRS) $(wildcard tests/unit/*.h tools/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(SAN_ASAN) $< $(LIB_SRCS) -lcmocka -lpthread -o $@

$(B)/unit/%-tsan: tests/unit/%.c $(LIB_SRCS) $(HDRS) $(wildcard tests/unit/*.h tools/*.h)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(SAN_TSAN) $< $(LIB_SRCS) -lcmocka -lpthread -o $@

check: $(UNIT_ASAN) $(UNIT_TSAN) $(BENCHES)
	@tests/run-host.sh $(UNIT_ASAN) $(UNIT_TSAN) "$(B)/bench/queue_bench -q" \
		tests/headers/headers.sh tests/results-test.sh

# clanq-bench native's smoke run (make test): the library's data path on
# this machine's CPUs beside raw shm, UCX and libfabric, quick.
native-smoke: $(B)/bench/clanq-bench
	@tests/run-host.sh "tests/native-smoke.sh $(B)/bench/clanq-bench"

# ---- kernel modules --------------------------------------------------------

# $(call kbuild,NAME,KDIR,SRCDIR): build SRCDIR's Kbuild against KDIR in
# build/mod/NAME/<basename of SRCDIR>.
define kbuild
	@set -e; d=$(CURDIR)/$(B)/mod/$(1)/$(notdir $(3)); mkdir -p $$d; \
	find $$d -type l -delete; \
	cd $(CURDIR)/$(3) && for f in $$(find . -type f); do \
		mkdir -p $$d/$${f%/*}; ln -s $(CURDIR)/$(3)/$${f#./} $$d/$$f; done; \
	$(MAKE) --no-print-directory -C $(2) M=$$d CLANQ_ROOT=$(CURDIR) \
		CLANQ_WERROR=y CLANQ_GCOV=$(CLANQ_GCOV) W=1 $(4) modules
endef

module:
	@test -n "$(KDIR)" || { echo "no kernel headers: set KDIR or run 'make deps'"; exit 1; }
	$(call kbuild,$(MODNAME),$(KDIR),driver)

module-stock:
	$(call kbuild,stock,$(shell $(KERNEL_SH) stock-kdir),driver)

module-debug:
	@kdir=$$($(KERNEL_SH) debug) && \
	$(MAKE) --no-print-directory DEBUG_KDIR=$$kdir module-debug-build

# CLANQ_MODNAME: the build directory under build/mod/ (`make coverage`
# builds a gcov-profiled copy, CLANQ_GCOV=y, in its own: debug-gcov)
CLANQ_MODNAME ?= debug
module-debug-build:
	$(call kbuild,$(CLANQ_MODNAME),$(DEBUG_KDIR),driver,CLANQ_TEST=y)
	$(call kbuild,$(CLANQ_MODNAME),$(DEBUG_KDIR),tests/kunit)

# ---- the two commands and their parts ---------------------------------------

deps:
	@scripts/deps.sh

lint: deps
	@scripts/lint.sh

test: deps
	@tests/run.sh

# make test's pair stage over siw (iWARP over TCP) instead of Soft-RoCE;
# a target of its own: with it as a stage a cold make test passes 50 min.
# make test's MPI stage: Open MPI's mpirun running mpi_check on 2 and 4
# ranks over the provider through ofi_rxm, in the stock-kernel VM
mpi: deps
	@tests/vm/mpi-test.sh

pair-siw: deps
	@CLANQ_PAIR_PROVIDER=siw tests/vm/vm.sh pair

# Then two stock-kernel VMs wired to each other only, Soft-RoCE between
# them, and clanq-oob-pingpong from one to the other (tests/vm/pair.sh).
run: deps
	@tests/vm/vm.sh run; rc=$$?; tests/vm/vm.sh pair-run && exit $$rc

# clanq-bench's whole suite beside its baselines, stock-kernel VM: tables
# live, then CSV, JSON, a summary of ratios and the plots in build/bench/
# (CLANQ_BENCH_ARGS, e.g. "-q lat", runs less).
bench: deps
	@tests/vm/vm.sh bench

# The same natively, in full (minutes): no VM, no driver; the table on
# stdout and in build/bench/native.txt, CSV and JSON beside it.
bench-native: deps $(B)/bench/clanq-bench
	@mkdir -p $(B)/bench
	@$(B)/bench/clanq-bench -o $(B)/bench/native native | tee $(B)/bench/native.txt

vm-shell: deps
	@tests/vm/vm.sh shell

# Your own programs against the real module, non-interactively: PROG's
# files copied into the stock-kernel VM, ARGS run there by sh, the
# output on stdout, the command's exit status make's "Error N"
# (tests/vm/vm.sh exec: the same, with the status as its own). ARGS goes
# through the environment so that its quotes and semicolons reach the
# guest's shell, not this recipe's.
vm-run: export CLANQ_EXEC_ARGS = $(ARGS)
vm-run: deps
	@$(if $(KERNEL),CLANQ_VM_KERNEL=$(KERNEL)) $(if $(TIMEOUT),CLANQ_EXEC_TIMEOUT=$(TIMEOUT)) \
		tests/vm/vm.sh exec $(PROG) -- "$$CLANQ_EXEC_ARGS"

# The coverage-guided fuzzer alone in the debug VM, FUZZ_SECONDS long.
FUZZ_SECONDS ?= 600
# The soaks in full (tests/vm/soak.list: ten million ordered writes, a
# million blocking round trips each way, ...), debug kernel: hours.
soak: deps
	@CLANQ_LIST=tests/vm/soak.list CLANQ_VM_TIMEOUT=$${CLANQ_VM_TIMEOUT:-14400} tests/vm/vm.sh test

fuzz: deps
	@CLANQ_FUZZ_SECONDS=$(FUZZ_SECONDS) tests/vm/vm.sh fuzz

# Line and function coverage of driver/**/*.c by the VM tests (KUnit,
# integration tests, a fuzz pass), from a gcov-profiled module.
coverage: deps
	@tests/vm/vm.sh coverage; rc=$$?; scripts/coverage.sh build/mod/debug-gcov/driver && exit $$rc

# ---- install ---------------------------------------------------------------

# What `make install` puts in BINDIR: the examples a user runs, the
# benchmark tool and tools/*.c (clanqstat, clanqctl).
PROGRAMS := $(addprefix $(B)/examples/,clanq-echo-server clanq-echo-client clanq-info clanq-stream \
	clanq-kv) \
	$(B)/bench/clanq-bench $(TOOLS)
# Man pages by section; alias pages (".so man3/x.3") are installed as they are.
MANPAGES := $(wildcard docs/man/*.[1-8])
INST_HDRS := include/clanq.h $(wildcard include/clanq/*.h)
# what the module's source needs of include/ (DKMS)
KERNEL_HDRS := include/clanq/queue.h include/clanq/uapi.h

install: lib tools $(PROGRAMS) $(PROV_SO)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/clanq \
		$(DESTDIR)$(BINDIR) $(DESTDIR)$(UDEVDIR) $(DESTDIR)$(DATADIR)/clanq \
		$(DESTDIR)$(FABRICDIR) $(DESTDIR)$(MANDIR)/man7
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf libclanq.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libclanq.so
	install -m 644 include/clanq.h $(DESTDIR)$(INCDIR)/
	install -m 644 $(filter include/clanq/%,$(INST_HDRS)) $(DESTDIR)$(INCDIR)/clanq/
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
		'Name: libclanq' 'Description: CLAN-style user-level networking over a soft NIC' \
		'Version: $(VERSION)' 'Libs: -L$${libdir} -lclanq' 'Cflags: -I$${includedir}' \
		> $(DESTDIR)$(LIBDIR)/pkgconfig/libclanq.pc
	install -m 755 $(PROGRAMS) $(DESTDIR)$(BINDIR)/
	@set -e; for f in $(MANPAGES); do \
		d=$(DESTDIR)$(MANDIR)/man$${f##*.}; \
		echo "install -m 644 $$f $$d/"; install -d $$d; install -m 644 $$f $$d/; \
	done
	install -m 644 udev/60-clanq.rules $(DESTDIR)$(UDEVDIR)/
	install -m 644 udev/61-clanq-group.rules $(DESTDIR)$(DATADIR)/clanq/
	install -m 644 $(PROV_SO) $(DESTDIR)$(FABRICDIR)/
	install -m 644 provider/fi_clanq.7 $(DESTDIR)$(MANDIR)/man7/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libclanq.{a,so,so.$(SOVERSION)} $(DESTDIR)$(LIBDIR)/pkgconfig/libclanq.pc
	rm -f $(addprefix $(DESTDIR)$(INCDIR)/,$(INST_HDRS:include/%=%))
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(PROGRAMS)))
	rm -f $(foreach f,$(MANPAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(f)))/$(notdir $(f)))
	rm -f $(DESTDIR)$(UDEVDIR)/60-clanq.rules $(DESTDIR)$(DATADIR)/clanq/61-clanq-group.rules
	rm -f $(DESTDIR)$(FABRICDIR)/libclanq-fi.so $(DESTDIR)$(MANDIR)/man7/fi_clanq.7
	rmdir $(DESTDIR)$(FABRICDIR) 2>/dev/null || true
	rmdir $(DESTDIR)$(INCDIR)/clanq $(DESTDIR)$(DATADIR)/clanq 2>/dev/null || true

# The module's source as DKMS wants it: driver/ and include/ beside
# dkms.conf, whose version comes from VERSION. Then, as root:
# dkms install clanq/$(VERSION)
install-dkms:
	install -d $(DESTDIR)$(DKMSDIR)/driver/verbs $(DESTDIR)$(DKMSDIR)/include/clanq
	install -m 644 driver/Kbuild $(wildcard driver/*.[ch]) $(DESTDIR)$(DKMSDIR)/driver/
	install -m 644 $(wildcard driver/verbs/*.[ch]) $(DESTDIR)$(DKMSDIR)/driver/verbs/
	install -m 644 $(KERNEL_HDRS) $(DESTDIR)$(DKMSDIR)/include/clanq/
	sed 's/#MODULE_VERSION#/$(VERSION)/' dkms.conf > $(DESTDIR)$(DKMSDIR)/dkms.conf

.PHONY: tools install-dkms deb print-version print-soversion abi-check

# Debian packages (debian/) built from a copy of the tracked tree:
# build/deb/*.deb; scripts/deb.sh says how.
deb: deps
	@scripts/deb.sh

# for scripts (deb.sh, tests/pkg)
print-version:
	@echo $(VERSION)

print-soversion:
	@echo $(SOVERSION)

# make test's ABI check: the library's exports and the structs they take
# against tests/abi/libclanq.so.$(SOVERSION).dump (tests/abi/abi-check.sh).
abi-check: $(LIB_SO)
	@CLANQ_ABI_SO=$(LIB_SO) tests/run-host.sh tests/abi/abi-check.sh

clean:
	rm -rf $(B)
