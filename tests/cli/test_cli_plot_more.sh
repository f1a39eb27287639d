#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_plot_more.sh GPUCAP CLI_ALLOC: the usage picture names the card (its index and name, as
# NVML gives them, also for a report the library wrote), keeps its labels apart (the peak's and the budget's off the denial marks and
# off each other), draws a run shorter than one bucket as a shape on a millisecond axis; and
# `gpucap plot` takes a JSON report as hostile: a figure of 1.5e19 bytes or a huge time ends in
# bounded time with a bounded picture, and markup in a uuid or a name stays text; a FIFO the job
# plants among the run's timelines does not hang `gpucap run --report`.
set -u
gpucap=$1 alloc=$2
. "$(dirname "$0")/../common.sh"
export FAKECUDA_CTX_BYTES=0 GPUCAP_CONTEXT_RESERVE=0

svg_facts=$(dirname "$0")/svg_facts.py

# Title: the card's index and name.
"$gpucap" run --memory 64MiB --report "$t/c.svg" -- "$alloc" a32 a32 a8 a8 F > /dev/null 2>&1
facts python3 "$svg_facts" "$t/c.svg" || bad "the SVG does not parse"
grep -q "^title=GPU 0 (Fake GPU 0): peak 64 MiB of a 64 MiB budget$" "$t/facts" || bad "title: $(grep title "$t/facts")"
# A report the library wrote (GPUCAP_REPORT, no gpucap run: no index or name in it) is titled with
# the card's index and name all the same, where this machine has the card.
GPUCAP_LEDGER=off GPUCAP_REPORT=$t/lib.json GPUCAP_REPORT_FORMAT=json LD_PRELOAD=$TEST_PRELOAD \
    "$alloc" a32 F > /dev/null 2>&1
"$gpucap" plot "$t/lib.json" -o "$t/lib.svg" 2> "$t/err" || bad "plot of the library's report: $(cat "$t/err")"
python3 "$svg_facts" "$t/lib.svg" > "$t/libfacts" || bad "the library report's SVG does not parse"
grep -q "^title=GPU 0 (Fake GPU 0): peak 32 MiB" "$t/libfacts" || bad "library report's title: $(grep title "$t/libfacts")"
# Labels apart: the peak is the budget, the denials are on it, at the peak's time.
grep -q "^clashes=0$" "$t/facts" || bad "labels collide: $(cat "$t/facts")"
grep -q "^marks=[1-9]" "$t/facts" || bad "no denial marks: $(cat "$t/facts")"
# A run shorter than a bucket: a shape, and the axis in milliseconds.
area=$(fact usage_area)
[ "${area:-0}" -gt 1000 ] || bad "a short run is a line: area $area"
grep -q "^xticks=.* ms" "$t/facts" || bad "time axis: $(grep xticks "$t/facts")"
# A denial a moment after the peak, where the peak's label would go.
"$gpucap" run --memory 64MiB --report "$t/n.svg" -- "$alloc" a60 s1 F a40 a40 s9 F > /dev/null 2>&1
facts python3 "$svg_facts" "$t/n.svg" || bad "the SVG does not parse"
grep -q "^clashes=0$" "$t/facts" || bad "the peak's label on a denial mark: $(cat "$t/facts")"
# Audit, a longer run: the label says what the job needs and still meets no mark.
"$gpucap" run --audit --memory 64MiB --report "$t/a.svg" -- "$alloc" a16 s2 a32 s1 a30 s1 a20 a40 s2 F > /dev/null 2>&1
facts python3 "$svg_facts" "$t/a.svg" || bad "the audit SVG does not parse"
grep -q "^clashes=0$" "$t/facts" || bad "audit labels collide: $(cat "$t/facts")"
grep -q "^title=GPU 0 (Fake GPU 0): this job needs" "$t/facts" || bad "audit title: $(grep title "$t/facts")"

# What a job needs is rounded up, never down: 6.25 GiB is "6.3 GiB" (printf rounds it to 6.2, which would fail).
printf '{"mode":"audit","devices":[{"uuid":"GPU-1","index":0,"name":"n","physical":17179869184,"budget":17179869184,"peak":6710886400,"denials":0,"timeline":{"points":[[0,6710886400,6710886400,0]]}}]}' \
    > "$t/up.json"
"$gpucap" plot "$t/up.json" -o "$t/up.svg" 2> "$t/err" || bad "plot: $(cat "$t/err")"
facts python3 "$svg_facts" "$t/up.svg" || bad "the rounding SVG does not parse"
grep -q "^title=.*this job needs 6.3 GiB" "$t/facts" || bad "needs rounded down: $(grep title "$t/facts")"
[ "$(fact peak_label)" = "peak 6.3 GiB: the budget this job needs" ] || bad "peak label rounded down: '$(fact peak_label)'"

# Hostile reports: bounded, escaped.
cat > "$t/huge.json" <<'J'
{"mode":"enforce","devices":[{"uuid":"GPU-<script>alert(1)</script>","name":"<b>x</b>&","index":3,
 "physical":1.5e19,"budget":1.5e19,"peak":1.5e19,"denials":1,
 "timeline":{"points":[[0,1.5e19,1.5e19,1],[1e300,-5,1e40,1e20],[-1,0,0,0]]}}]}
J
timeout 10 "$gpucap" plot "$t/huge.json" -o "$t/huge.svg" 2> "$t/err"; rc=$?
[ $rc = 0 ] || bad "huge figures: rc $rc $(cat "$t/err")"
size=$(stat -c %s "$t/huge.svg" 2> /dev/null || echo 0)
[ "$size" -gt 0 ] && [ "$size" -lt 200000 ] || bad "huge figures: picture of $size bytes"
grep -q "<script>\|<b>" "$t/huge.svg" && bad "markup copied into the SVG: $(grep -o '.\{20\}<script>.\{20\}' "$t/huge.svg")"
python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$t/huge.svg" || bad "hostile SVG does not parse"
grep -q "GPU 3 (&lt;b&gt;x&lt;/b&gt;&amp;)" "$t/huge.svg" || bad "name not escaped as text: $(grep title "$t/huge.svg")"
# One figure of 1.5e19 bytes: the gridlines of a scale near 2^64 end.
printf '{"mode":"enforce","devices":[{"uuid":"GPU-1","physical":1.5e19,"peak":1.5e19,"timeline":{"points":[[0,1.5e19,1.5e19,0]]}}]}' \
    > "$t/one.json"
timeout 10 "$gpucap" plot "$t/one.json" -o "$t/one.svg" 2> "$t/err"; rc=$?
size=$(stat -c %s "$t/one.svg" 2> /dev/null || echo 0)
[ $rc = 0 ] && [ "$size" -lt 200000 ] || bad "1.5e19 bytes: rc $rc, picture of $size bytes"
rm -f "$t/one.svg"
# Integers beyond 2^63 load too (as the numbers they are, clamped).
sed 's/1\.5e19/15000000000000000000/g' "$t/huge.json" > "$t/bigint.json"
timeout 10 "$gpucap" plot "$t/bigint.json" -o "$t/bigint.svg" 2> "$t/err"; rc=$?
[ $rc = 0 ] || bad "integers beyond 2^63: rc $rc $(cat "$t/err")"
# Characters XML 1.0 refuses even as references (U+FFFE, U+FFFF), and a name or uuid of multibyte
# characters longer than gpucap keeps (cut inside a character): '?', and the picture still parses.
u='GPU-a\uffff\ufffe\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9'
for name in "$u" "$u$u$u$u$u" 'x\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00\ud83d\ude00'; do
    printf '{"mode":"enforce","devices":[{"uuid":"%s%s","name":"%s","index":0,"physical":1073741824,"budget":1073741824,"peak":10,"denials":1,"timeline":{"points":[[0,10,10,0],[1,20,20,1]]}}]}' \
        "$u" "$name" "$name" > "$t/chars.json"
    timeout 10 "$gpucap" plot "$t/chars.json" -o "$t/chars.svg" 2> "$t/err" || bad "characters: $(cat "$t/err")"
    python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$t/chars.svg" 2> "$t/err" ||
        bad "a name of ${#name} characters: the SVG does not parse: $(tail -1 "$t/err")"
done
grep -q 'GPU-a??é' "$t/chars.svg" || bad "noncharacters not '?': $(grep -o 'GPU-a[^<]\{0,8\}' "$t/chars.svg" | head -1)"

# The job writes in the run's directory, where the picture's timelines are read: a FIFO (or a link to
# /dev/zero) named timeline.* there must not hang `gpucap run --report` (it blocked in open before).
timeout -s KILL 20 "$gpucap" run --memory 64MiB --report "$t/fifo.svg" -- sh -c \
    'd=$(dirname "$GPUCAP_LEDGER") && mkfifo "$d/timeline.fifo" && ln -s /dev/zero "$d/timeline.zero" && exec "$0" a8' \
    "$alloc" > /dev/null 2> "$t/err"; rc=$?
[ $rc = 0 ] || bad "a FIFO among the timelines: rc $rc (137: hung) $(cat "$t/err")"
python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$t/fifo.svg" 2> /dev/null ||
    bad "a FIFO among the timelines: no picture"

# Many points: at most a bounded number drawn.
python3 -c '
import json
pts = [[i * 0.001, 1 << 20, 1 << 20, 0] for i in range(200000)]
json.dump({"mode": "enforce", "devices": [{"uuid": "GPU-aaaaaaaa", "budget": 1 << 30, "peak": 1 << 20,
           "timeline": {"points": pts}}]}, open("'"$t"'/many.json", "w"))'
timeout 20 "$gpucap" plot "$t/many.json" -o "$t/many.svg" 2> "$t/err"; rc=$?
[ $rc = 0 ] || bad "many points: rc $rc $(cat "$t/err")"
size=$(stat -c %s "$t/many.svg" 2> /dev/null || echo 0)
[ "$size" -lt 8000000 ] || bad "many points: picture of $size bytes"
exit $fail
