# sanitizer_verdict.sh -- sourced by the run_sanitized.sh scripts (the tracer's and the MPI
# profiler's) after their runs: counts the sanitizer reports in $OUT/report*, prints
# "$kind: $runs runs, $fails wrong exit statuses, N sanitizer reports", and fails (keeping
# $OUT) on any report or wrong exit status; removes $OUT otherwise.
# A log that only lists the suppressions used is no report.
pattern='ERROR: [A-Za-z]*Sanitizer|runtime error:|WARNING: ThreadSanitizer'
reports=$(cat "$OUT"/report* 2>/dev/null | grep -cE "$pattern")
reports=${reports:-0}
echo "$kind: $runs runs, $fails wrong exit statuses, $reports sanitizer reports"
if [ "$reports" -ne 0 ]; then
    for f in $(grep -lE "$pattern" "$OUT"/report*); do echo "== $f"; head -60 "$f"; done
    echo "reports kept in $OUT"
    exit 1
fi
[ "$fails" -eq 0 ] || { echo "kept in $OUT"; exit 1; }
rm -rf "$OUT"
