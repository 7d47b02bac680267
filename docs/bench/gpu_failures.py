#!/usr/bin/env python3
"""Writes the GPU-failure benchmark of BENCHMARKS.md ("DRA inputs changed one at a time") into a
directory: nodes.csv, an openb node list of 1,000 nodes x 8 GPUs, and trace.yaml, muster's trace
format: 6,000 single-pod jobs of 1-8 GPUs over a day and 2,000 fatal GPU failures (XID 79), each
recovered 10 minutes to 2 hours later. Seeded: the same files every time.

    python3 docs/bench/gpu_failures.py /tmp/gpu-failures
    muster sim --openb-nodes /tmp/gpu-failures/nodes.csv --trace /tmp/gpu-failures/trace.yaml -o json
"""
import os
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
rng = random.Random(7)
NODES, DAY = 1000, 86400
with open(os.path.join(out, "nodes.csv"), "w") as f:
    f.write("sn,cpu_milli,memory_mib,gpu,model\n")
    for i in range(NODES):
        f.write(f"openb-node-{i:04d},96000,393216,8,G2\n")
jobs = []
for j in range(6000):
    arrival = rng.randint(0, DAY)
    gpus = rng.choice([1, 1, 2, 4, 8])
    jobs.append((arrival, f"j{j}", gpus, rng.randint(600, 14400)))
events = []
for _ in range(2000):
    at = rng.randint(0, DAY)
    node, device = rng.randrange(NODES), rng.randrange(8)
    events.append((at, f"  gpuFailure: {{node: openb-node-{node:04d}, device: gpu-{device}, xid: 79}}"))
    events.append((at + rng.randint(600, 7200), f"  gpuRecovery: {{node: openb-node-{node:04d}, device: gpu-{device}}}"))
jobs.sort()
events.sort()
with open(os.path.join(out, "trace.yaml"), "w") as f:
    f.write("apiVersion: muster.dev/v1alpha1\nkind: Trace\njobs:\n")
    for arrival, name, gpus, duration in jobs:
        f.write(f"- name: {name}\n  arrival: {arrival}s\n  duration: {duration}s\n  gpusPerPod: {gpus}\n")
    f.write("events:\n")
    for at, event in events:
        f.write(f"- at: {at}s\n{event}\n")
