# SPDX-License-Identifier: GPL-2.0 OR MIT
# In the VM (provider/tests/mutants.py says how): each mutant against
# test_fabric and fi_pingpong -c, one line each; then the real provider's
# test_fabric, and a trial of FI_EP_RDM through ofi_rxm over it.
cd /clanq/exec
for so in m[1-9]*.so; do
	m=${so%.so}
	mkdir -p /tmp/$m && cp $so /tmp/$m/libclanq-fi.so
	export FI_PROVIDER_PATH=/tmp/$m
	timeout 200 ./test_fabric > /tmp/$m.unit 2>&1; u=$?
	fails=$(grep '^\[  FAILED  \] test_' /tmp/$m.unit | sort -u | awk '{print $4}' | tr '\n' ' ')
	p=""
	for s in 8 4096; do
		timeout 60 ./fi_pingpong -p clanq -e msg -c -d clanq0 -S $s -I 100 -B 47700 > /tmp/$m.srv 2>&1 &
		sleep 1
		timeout 60 ./fi_pingpong -p clanq -e msg -c -d clanq1 -S $s -I 100 -P 47700 127.0.0.1 > /tmp/$m.cli 2>&1
		p="$p $s:$?"
		wait
	done
	echo "MUTANT $m: test_fabric rc=$u failed: $fails| fi_pingpong$p"
done
# the real one, then FI_EP_RDM through ofi_rxm over it (a trial)
mkdir -p /tmp/real && cp /clanq/exec/m0-real.so /tmp/real/libclanq-fi.so
export FI_PROVIDER_PATH=/tmp/real
timeout 200 ./test_fabric; echo "REAL test_fabric rc=$?"
./fi_info -p "clanq;ofi_rxm" -t FI_EP_RDM | head -8
for s in 8 4096 65536; do
	timeout 60 ./fi_pingpong -p "clanq;ofi_rxm" -e rdm -c -d clanq0 -S $s -I 100 -B 47800 > /tmp/rdm.srv 2>&1 &
	sleep 1
	timeout 60 ./fi_pingpong -p "clanq;ofi_rxm" -e rdm -c -d clanq1 -S $s -I 100 -P 47800 127.0.0.1 > /tmp/rdm.cli 2>&1
	echo "RDM $s: client rc=$?"; wait; echo "server rc=$?"
	cat /tmp/rdm.cli; head -5 /tmp/rdm.srv
done
