#!/bin/sh
# Runs a ThreadSanitizer binary. On kernels with many mmap random bits
# (vm.mmap_rnd_bits > 28, e.g. newer Ubuntu/Debian kernels) TSan aborts with
# "unexpected memory mapping"; running without ASLR (setarch -R) avoids that
# without needing root to lower the sysctl.
# die_after_fork=0: the runtime tests fork a multi-threaded process on purpose.
TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}halt_on_error=1:die_after_fork=0:second_deadlock_stack=1"
export TSAN_OPTIONS
out=$(mktemp)
"$@" >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q -e "unexpected memory mapping" -e "FATAL: ThreadSanitizer" "$out"; then
    echo "tsan_run: retrying without ASLR (setarch -R)"
    setarch "$(uname -m)" -R "$@" >"$out" 2>&1
    rc=$?
fi
cat "$out"
rm -f "$out"
exit $rc
