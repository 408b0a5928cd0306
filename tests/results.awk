# Turn a test log into result lines: "PASS name", "FAIL name: why",
# "SKIP name". Used for host runs (tests/run-host.sh) and for the VM
# console (tests/vm/vm.sh), so both are counted the same way.
#
# Understands:
#  - frames "CLANQ-BEGIN name" ... "CLANQ-END name rc=N" around a program;
#    inside, cmocka's "[       OK ] t" / "[  FAILED  ] t" / "[  SKIPPED ] t"
#    / "[  ERROR   ] t" (its setup or teardown failed) lines are the
#    results; a frame with none counts as one test, by rc;
#    a nonzero rc with no failed case (a crash) is one more failure;
#  - KUnit KTAP: "    ok N case" / "    not ok N case" inside a suite;
#    a suite that fails with no failed case counts as one failure;
#  - with -v vm=1: "CLANQ-DONE" must appear, and any kernel splat in the
#    log is a failure of its own.
# Variables: prefix (prepended to names), vm, want_kunit.

function emit(kind, name, why) {
	if (kind == "FAIL") {
		print "FAIL " prefix name (why != "" ? ": " why : "")
		nfail++
	} else {
		print kind " " prefix name
	}
}

{
	sub(/\r$/, "")
	line = $0
	# printk timestamps: "[    1.234567] "
	sub(/^\[ *[0-9]+\.[0-9]+\] /, "", line)
}

line ~ /^CLANQ-BEGIN / {
	prog = substr(line, 13); incase = 1; cases = 0; casefail = 0; group = -1
	delete seen
	next
}

line ~ /^CLANQ-END / && incase {
	rc = line; sub(/.* rc=/, "", rc); sub(/ .*/, "", rc); rc += 0
	if (cases == 0)
		emit(rc == 0 ? "PASS" : "FAIL", prog, rc == 0 ? "" : "exit status " rc)
	else if (rc != 0 && casefail == 0)
		emit("FAIL", prog, "exit status " rc " after its tests passed (crash?)")
	incase = 0
	next
}

incase && line ~ /^\[       OK \] / {
	name = substr(line, 14); cases++
	emit("PASS", prog "/" name)
	next
}

incase && line ~ /^\[  SKIPPED \] / {
	name = substr(line, 14)
	if (name ~ /^[0-9]+ test\(s\)/ || (name in seen)) next
	seen[name] = 1; cases++
	emit("SKIP", prog "/" name)
	next
}

incase && line ~ /^\[  FAILED  \] / {
	name = substr(line, 14)
	# cmocka lists failures twice: when they happen and in the summary
	if (name ~ /^[0-9]+ test\(s\)/ || (name in seen)) next
	seen[name] = 1; cases++; casefail++
	if (name ~ /^GROUP (SETUP|TEARDOWN)$/) group = NR
	emit("FAIL", prog "/" name, "see the log")
	next
}

# cmocka's ERROR: a case whose setup or teardown failed (it is not listed
# as FAILED), unless it is an assertion's location ("--- ...", its case
# fails on the next lines) or the group's name after a failed group
# setup or teardown (that was counted)
incase && line ~ /^\[  ERROR   \] / {
	name = substr(line, 14)
	if (name ~ /^--- / || NR == group + 1 || (name in seen)) next
	seen[name] = 1; cases++; casefail++
	emit("FAIL", prog "/" name, "its setup or teardown failed")
	next
}

# KTAP: a suite's cases are indented 4 spaces; parameterised sub-cases
# (8 spaces) are summed up by their case line, so they are not counted.
line ~ /^    # Subtest: / { suite = substr(line, 16); suitefail = 0; next }
line ~ /^    (not )?ok [0-9]+ / {
	name = line; sub(/^    (not )?ok [0-9]+ /, "", name)
	kunit++
	if (name ~ /# SKIP/) { sub(/ *# SKIP.*/, "", name); emit("SKIP", "kunit/" suite "/" name) }
	else if (line ~ /^    not ok/) { emit("FAIL", "kunit/" suite "/" name, "KUnit"); suitefail++ }
	else emit("PASS", "kunit/" suite "/" name)
	next
}
line ~ /^not ok [0-9]+ / && suite != "" {
	if (suitefail == 0) emit("FAIL", "kunit/" suite, "suite failed")
	next
}

line ~ /^CLANQ-DONE/ { done = 1 }

vm && line ~ /(BUG:|WARNING:|Oops|Call Trace|Kernel panic|UBSAN:|KASAN:|general protection fault|unreferenced object|suspected memory leak|INFO: (possible|inconsistent|suspicious)|DEBUG_LOCKS_WARN_ON|rcu_sched self-detected stall|rcu: INFO|soft lockup|blocked for more than)/ {
	if (splats++ < 10)
		emit("FAIL", "kernel-log", line)
}

END {
	if (vm && !done)
		emit("FAIL", "vm", "did not finish (hung, crashed or timed out)")
	if (want_kunit && kunit == 0)
		emit("FAIL", "kunit", "no KUnit results in the log")
}
