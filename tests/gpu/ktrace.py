#!/usr/bin/env python3
"""Per-kernel table of a COSMOS_KTRACE build's records (kernels/ktrace.cuh), for decode steps.

On the GPU machine, with a module built with -DCOSMOS_KTRACE=ON:
  COSMOS_CUDA_MODULE=$PWD/<ktrace libcosmos-cuda.so> COSMOS_KTRACE_DIR=/tmp/kt \
    .carry/bin/cosmos-cli bench --random cosmos-reason1-7b --device cuda --precision int4 \
    --prompt-lens 128 --depth 0 --gen 32 --reps 1
  python3 tests/gpu/ktrace.py /tmp/kt/*.bin

A launch is the records of one kernel (the same rows x cols, or the decode attention) whose block
starts follow each other within 10 us. Launches are ordered by their first block's start; each is
compared with the launch before it (its predecessor in the chain). Columns, in us, means over the
middle 80% of the launches:
  contrib      last block's end minus the predecessor's last block's end: the launch's share of a token
  start        first block's start relative to the predecessor's end (negative: started under PDL)
  release      first block past the PDL wait, relative to the predecessor's end
  wait         a block's start to its wait's end (median block)
  loop         the wait's end to the end of the prologue's staging loop (median block; gemv only)
  prologue     the wait's end to the end of the prologue (median block; gemv only)
  main         the prologue's end (attention: the wait's) to the block's end (median block)
  spread       last block's end minus first block's end
A kernel marked * follows lm_head: its contrib includes sampling, the embedding and the host.

--detail NAME[,NAME...] (e.g. --detail attention, or --detail q/k/v,down): per block of each named
kernel's launches, relative to the predecessor's last block's end (us): its start, its wait's end
and its end as quantiles (10, 50, 90, 100%) over the blocks of the middle 80% of the launches, and
its duration; shows whether a long spread comes from blocks that start late (no room on the SMs) or
from blocks that run long.
Where the kernel marks its loop and prologue (the decode attention: its first round's K/V and Q in
shared memory, its rounds done), also the phases in SM cycles converted to us: the wait's end to
the loop mark, the loop mark to the prologue mark, the prologue mark to the end.
"""
import sys

import numpy as np

REC = np.dtype([('g0', '<u8'), ('g1', '<u8'), ('cw', '<i8'), ('cp', '<i8'), ('ce', '<i8'), ('sm', '<i8'),
                ('a', '<i8'), ('b', '<i8'), ('cl', '<i8')])
NAMES = {(4608, 3584): 'q/k/v', (3584, 3584): 'o', (37888, 3584): 'gate/up', (3584, 18944): 'down',
         (152064, 3584): 'lm_head'}  # the 7B's products (rows x cols)


def label(a, b):
    return 'attention' if a == -1 else NAMES.get((a, b), '%dx%d' % (a, b))


def launches(recs, ghz):
    out = []
    for key in sorted(set(zip(recs['a'].tolist(), recs['b'].tolist()))):
        r = recs[(recs['a'] == key[0]) & (recs['b'] == key[1])]
        r = r[np.argsort(r['g0'])]
        cut = np.where(np.diff(r['g0'].astype(np.int64)) > 10000)[0] + 1
        for part in np.split(r, cut):
            g0 = part['g0'].astype(np.int64)
            g1 = part['g1'].astype(np.int64)
            gemv = key[0] != -1
            waited = part['cw'] > 0  # attention blocks with nothing to do return before the wait
            out.append(dict(
                name=label(*key), s0=g0.min(), e0=g1.min(), e1=g1.max(), recs=part,
                rel=(g0[waited] + part['cw'][waited] / ghz).min() if waited.any() else g0.min(),
                wait=np.median(part['cw'][waited]) / ghz if waited.any() else 0.0,
                loop=np.median(part['cl'] - part['cw']) / ghz if gemv else 0.0,
                pro=np.median(part['cp'] - part['cw']) / ghz if gemv else 0.0,
                main=np.median(part['ce'] - (part['cp'] if gemv else part['cw'])) / ghz,
                blocks=len(part)))
    out.sort(key=lambda l: l['s0'])
    return out


def detail(ls, name, ghz):
    lo, hi = max(len(ls) // 10, 1), len(ls) * 9 // 10
    start, wait, end, phases = [], [], [], []
    for i in range(lo, hi):
        p, l = ls[i - 1], ls[i]
        if l['name'] != name:
            continue
        r = l['recs']
        g0 = r['g0'].astype(np.int64) - p['e1']
        waited = r['cw'] > 0
        start.append(g0[waited])
        wait.append(g0[waited] + r['cw'][waited] / ghz)
        end.append(r['g1'].astype(np.int64)[waited] - p['e1'])
        w = r[waited]
        phases.append(np.stack([w['cl'] - w['cw'], w['cp'] - w['cl'], w['ce'] - w['cp']]) / ghz)
    if not start:
        print('no launches of %s' % name)
        return
    start, wait, end = (np.concatenate(x) / 1e3 for x in (start, wait, end))
    q = [10, 50, 90, 100]
    print('%s, %d blocks that waited, us from the predecessor\'s end (quantiles %s):' % (name, len(start), q))
    for label_, v in (('start', start), ('wait end', wait), ('end', end), ('duration', end - start)):
        print('  %-9s ' % label_ + ' '.join('%8.2f' % x for x in np.percentile(v, q)))
    ph = np.concatenate(phases, axis=1) / 1e3
    if (ph[0] > 0).all() and (ph[1] > 0).all():  # the kernel marks its loop and prologue (SM cycles)
        for label_, v in (('to loop', ph[0]), ('loop->pro', ph[1]), ('pro->end', ph[2])):
            print('  %-9s ' % label_ + ' '.join('%8.2f' % x for x in np.percentile(v, q)))


def main(args):
    detail_of = None
    if len(args) > 2 and args[0] == '--detail':
        detail_of, args = args[1], args[2:]
    paths = args
    recs = np.concatenate([np.fromfile(p, dtype=REC) for p in paths])
    dur = (recs['g1'] - recs['g0']).astype(np.float64)
    ghz = float(np.median(recs['ce'][dur > 2000] / dur[dur > 2000]))  # SM cycles per ns
    ls = launches(recs, ghz)
    print('%d records, %d launches, SM clock %.3f GHz' % (len(recs), len(ls), ghz))
    rows = {}
    lo, hi = max(len(ls) // 10, 1), len(ls) * 9 // 10
    for i in range(lo, hi):
        p, l = ls[i - 1], ls[i]
        name = l['name'] + ('*' if p['name'] == 'lm_head' else '')
        rows.setdefault(name, []).append([(l['e1'] - p['e1']) / 1e3, (l['s0'] - p['e1']) / 1e3, (l['rel'] - p['e1']) / 1e3,
                                          l['wait'] / 1e3, l['loop'] / 1e3, l['pro'] / 1e3, l['main'] / 1e3,
                                          (l['e1'] - l['e0']) / 1e3, l['blocks']])
    cols = ['contrib', 'start', 'release', 'wait', 'loop', 'prologue', 'main', 'spread', 'blocks']
    print('%-11s %6s ' % ('kernel', 'count') + ' '.join('%9s' % c for c in cols))
    total = 0.0
    for name in sorted(rows):
        m = np.mean(np.array(rows[name]), axis=0)
        total += m[0] * len(rows[name])
        print('%-11s %6d ' % (name, len(rows[name])) + ' '.join('%9.2f' % x for x in m[:-1]) + ' %9.0f' % m[-1])
    tokens = len(rows.get('lm_head', []))
    if tokens:
        print('per token: %.1f us (%.1f tok/s) over %d tokens' % (total / tokens, 1e6 / (total / tokens), tokens))
    for name in detail_of.split(',') if detail_of else []:
        detail(ls, name, ghz)


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
