#!/usr/bin/env bash
# Results a CI can judge (docs/design/results.md), as a CI runs them: bench
# --json carries its provenance and raw samples; --baseline gives a verdict
# and exit code; `tether compare` on crafted results gives every verdict
# and exit code deterministically; --junit writes XML that python3's
# xml.etree parses, escaped whatever the error says; profile --format
# chrome-trace writes a trace with an event per call. Real timings are
# never asserted: a real comparison may say anything but must say it well.
set -u
tether=$1
dir=$2
py=/usr/bin/python3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; exit 1; }
model="$root/examples/mlp.rx"
shapes=(--random-inputs --shape x=8x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)

# bench --json: the document with its provenance.
"$tether" bench "$model" "${shapes[@]}" --number 5 --repeat 6 --seed 7 --json > "$dir/a.json" \
  2> "$dir/a.log" || fail "bench --json: $(cat "$dir/a.log")"
$py - "$dir/a.json" <<'EOF' || fail "bench document: $(cat "$dir/a.json")"
import json, re, sys
d = json.load(open(sys.argv[1]))
assert d['kind'] == 'tether.bench' and d['version'] == 1, d
assert len(d['samples']) == 6 and d['repeat'] == 6 and d['total_calls'] >= 31, d
t = d['timing']
assert (t['number'], t['repeat'], t['min_repeat_ms'], t['cooldown_interval_ms'],
        t['repeats_to_cooldown'], t['cache_flush_bytes'], t['concurrent']) == (5, 6, 0, 0, 1, 0, False), t
p = d['provenance']
sha = re.compile('^[0-9a-f]{64}$')
assert sha.match(p['model']['sha256']) and sha.match(p['module_sha256']), p
assert p['model']['path'].endswith('examples/mlp.rx'), p
assert re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$', p['timestamp']), p
names = [i['name'] for i in p['inputs']]
assert names == ['x', 'w0', 'b0', 'w1', 'b1'], names
x = p['inputs'][0]
assert x == {'name': 'x', 'dtype': 'float32', 'shape': [8, 784], 'source': 'random',
             'seed': 7, 'low': -1.0, 'high': 1.0}, x
assert p['compiler']['version'].startswith('tether-compiler '), p['compiler']
assert p['compiler']['target'], p['compiler']
assert p['daemon']['address'] == 'embedded' and p['daemon']['version'], p['daemon']
assert p['daemon']['protocol'] == '1.6', p['daemon']
assert p['daemon']['target']['triple'], p['daemon']
s = p['device_state']
assert s['online_cpus'] >= 1 and s['hostname'] and s['kernel'] and s['cpu_model'], s
assert isinstance(s['cpu_frequency'], list) and isinstance(s['temperatures'], list), s
assert d['exclusive'] is True, d
EOF

# A .npy input is hashed.
$py -c "import numpy as np; np.save('$dir/x.npy', np.ones((8, 784), dtype=np.float32))"
"$tether" bench "$model" --input x=@"$dir/x.npy" "${shapes[@]}" --number 2 --repeat 2 --json \
  > "$dir/npy.json" || fail "bench with a .npy input"
$py - "$dir/npy.json" <<'EOF' || fail "npy input provenance: $(cat "$dir/npy.json")"
import hashlib, json, sys
import numpy as np
x = json.load(open(sys.argv[1]))['provenance']['inputs'][0]
want = hashlib.sha256(np.ones((8, 784), dtype=np.float32).tobytes()).hexdigest()
assert x['source'] == 'file' and x['sha256'] == want and x['path'].endswith('x.npy'), x
EOF

# bench --baseline: a verdict, an exit code a CI can act on, JUnit XML.
"$tether" bench "$model" "${shapes[@]}" --seed 7 --baseline "$dir/a.json" --junit "$dir/bench.xml" \
  > "$dir/b.log" 2>&1
rc=$?
case $rc in 0|3|4) ;; *) fail "bench --baseline exited $rc: $(cat "$dir/b.log")" ;; esac
grep -Eq "^verdict   (faster|slower|same|unstable): " "$dir/b.log" || fail "no verdict: $(cat "$dir/b.log")"
grep -q "^baseline  $dir/a.json" "$dir/b.log" || fail "no baseline line: $(cat "$dir/b.log")"
grep -q "6 repeats of 5 calls" "$dir/b.log" || fail "the baseline's timing settings were not reused: $(cat "$dir/b.log")"
$py - "$dir/bench.xml" "$rc" <<'EOF' || fail "bench junit: $(cat "$dir/bench.xml")"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == 'testsuites', root.tag
suite = root.find('testsuite')
case = suite.find('testcase')
assert case.get('classname') == 'tether.bench.mlp' and case.get('name') == 'main on cpu:0', case.attrib
props = {p.get('name'): p.get('value') for p in case.find('properties')}
assert props['verdict'] in ('faster', 'slower', 'same', 'unstable'), props
assert len(props['module_sha256']) == 64, props
failed = case.find('failure') is not None
assert failed == (sys.argv[2] != '0'), (failed, sys.argv[2])
assert suite.get('failures') == ('1' if failed else '0'), suite.attrib
EOF

# Baselines that cannot be one: exit 5 and a clear message.
expect_rc() {  # rc, message fragment, command...
  local want=$1 msg=$2; shift 2
  "$@" > "$dir/out.log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$dir/out.log")"
  grep -q -- "$msg" "$dir/out.log" || fail "$*: output lacks \"$msg\": $(cat "$dir/out.log")"
}
echo '{"calls": []}' > "$dir/report.json"
expect_rc 5 "is not a tether bench result" "$tether" bench "$model" "${shapes[@]}" --baseline "$dir/report.json"
expect_rc 5 "cannot read --baseline" "$tether" bench "$model" "${shapes[@]}" --baseline "$dir/missing.json"
$py -c "
import json; d = json.load(open('$dir/a.json')); d['samples'] = []
json.dump(d, open('$dir/empty.json', 'w'))"
expect_rc 5 "has no samples" "$tether" bench "$model" "${shapes[@]}" --baseline "$dir/empty.json"
expect_rc 5 "measured another workload (inputs)" "$tether" bench "$model" --random-inputs \
  --shape x=16x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10 --baseline "$dir/a.json"
expect_rc 2 "percentage above 0" "$tether" bench "$model" --regression-threshold -3

# tether compare on crafted samples: every verdict and exit code.
$py - "$dir" <<'EOF' || fail "crafting results"
import json, random, sys
d = json.load(open(sys.argv[1] + '/a.json'))
def write(name, samples):
    e = dict(d); e['samples'] = samples
    json.dump(e, open(f'{sys.argv[1]}/{name}.json', 'w'))
rng = random.Random(5)
noisy = lambda median, n=20: [median * rng.lognormvariate(0, 0.03) for _ in range(n)]
write('base', noisy(1e-3))
write('same', noisy(1e-3))
write('slower', noisy(1.2e-3))
write('faster', noisy(0.8e-3))
write('bimodal', noisy(1e-3, 10) + noisy(1.3e-3, 10))
EOF
expect_rc 0 "^verdict   same: the same within noise" "$tether" compare "$dir/base.json" "$dir/same.json"
expect_rc 3 "^verdict   slower: .* beyond the regression threshold of 5%" \
  "$tether" compare "$dir/base.json" "$dir/slower.json"
expect_rc 0 "within the regression threshold of 30%" \
  "$tether" compare "$dir/base.json" "$dir/slower.json" --regression-threshold 30
expect_rc 0 "^verdict   faster" "$tether" compare "$dir/base.json" "$dir/faster.json"
expect_rc 4 "^verdict   unstable: this run cannot be judged: the samples form two clusters" \
  "$tether" compare "$dir/base.json" "$dir/bimodal.json"
expect_rc 5 "is not a tether bench result" "$tether" compare "$dir/base.json" "$dir/report.json"
"$tether" compare "$dir/base.json" "$dir/slower.json" --json > "$dir/cmp.json"
$py -c "
import json; c = json.load(open('$dir/cmp.json'))
assert c['verdict'] == 'slower' and c['regression'] is True and 1.1 < c['ci_low'] < c['ratio'] < c['ci_high'] < 1.3, c
assert c['method'] == 'percentile bootstrap of the ratio of medians' and c['resamples'] == 10000, c
" || fail "compare --json: $(cat "$dir/cmp.json")"

# JUnit escaping: an error naming a file full of markup still gives valid XML.
weird="$dir/a<b>&\"c'd.npy"
"$tether" run "$model" --input "x=@$weird" --junit "$dir/run-error.xml" > /dev/null 2>&1
[ $? -eq 1 ] || fail "run with a missing input should exit 1"
$py - "$dir/run-error.xml" "$weird" <<'EOF' || fail "run junit: $(cat "$dir/run-error.xml")"
import sys, xml.etree.ElementTree as ET
case = ET.parse(sys.argv[1]).getroot().find('testsuite').find('testcase')
err = case.find('error')
assert err is not None and sys.argv[2] in err.get('message'), err.attrib
assert err.get('type') == 'NOT_FOUND', err.attrib
EOF
"$tether" run "$model" "${shapes[@]}" --junit "$dir/run.xml" > /dev/null || fail "run --junit"
$py -c "
import xml.etree.ElementTree as ET
s = ET.parse('$dir/run.xml').getroot().find('testsuite')
assert s.get('tests') == '1' and s.get('errors') == '0' and s.get('failures') == '0', s.attrib
" || fail "run junit: $(cat "$dir/run.xml")"

# profile --format chrome-trace: a trace with one complete event per call.
"$tether" profile "$model" "${shapes[@]}" --format chrome-trace > "$dir/trace.json" \
  || fail "profile --format chrome-trace"
$py - "$dir/trace.json" <<'EOF' || fail "chrome trace: $(head -c 2000 "$dir/trace.json")"
import json, sys
t = json.load(open(sys.argv[1]))
events = t['traceEvents']
calls = [e for e in events if e['ph'] == 'X' and e['cat'] == 'call']
names = {e['name'] for e in calls}
assert any(n.startswith('fused_matmul') for n in names), names
assert all(e['dur'] >= 0 and e['ts'] >= 0 and e['pid'] == 1 for e in calls), calls
starts = [e['ts'] for e in calls]
assert starts == sorted(starts), 'calls in the order they ran'
run = [e for e in events if e['ph'] == 'X' and e['cat'] == 'run']
assert len(run) == 1 and all(e['ts'] + e['dur'] <= run[0]['dur'] + 1 for e in calls), run
assert any(e['ph'] == 'M' and e['args']['name'] == 'cpu0' for e in events)
assert t['otherData']['provenance']['module_sha256'], t['otherData']
EOF
# profile --format json: the report, readable as before, with its provenance.
"$tether" profile "$model" "${shapes[@]}" --format json > "$dir/profile.json" || fail "profile json"
$py -c "
import json; r = json.load(open('$dir/profile.json'))
assert r['kind'] == 'tether.profile' and r['calls'] and r['provenance']['device_state']['online_cpus'] >= 1, r
" || fail "profile json: $(head -c 2000 "$dir/profile.json")"
echo "results checks passed"
