#!/bin/sh
# Runs a sanitizer-built test binary. On kernels with many mmap random bits
# (vm.mmap_rnd_bits > 28, e.g. newer Ubuntu/Debian kernels) TSan aborts with
# "unexpected memory mapping" and gcc-12's ASan can die with DEADLYSIGNAL at
# start; running without ASLR (setarch -R) avoids both without root (no need to
# lower the sysctl). A timeout keeps a wedged run from hanging the build.
# die_after_fork=0: the runtime tests fork a multi-threaded process on purpose.
TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}halt_on_error=1:die_after_fork=0:second_deadlock_stack=1"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS
out=$(mktemp)
timeout 900 "$@" >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q -e "unexpected memory mapping" -e "FATAL: ThreadSanitizer" -e "DEADLYSIGNAL" "$out"; then
    echo "san_run: retrying without ASLR (setarch -R)"
    timeout 900 setarch "$(uname -m)" -R "$@" >"$out" 2>&1
    rc=$?
fi
cat "$out"
rm -f "$out"
exit $rc
