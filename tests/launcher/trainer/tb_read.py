#!/usr/bin/env python3
"""tb_read.py — reads a run's TensorBoard event file with the tensorboard package's own reader
(EventAccumulator, which checks every record's CRC-32Cs; given a directory, it reads its event files
in order and drops what a restart's SessionLog START supersedes) and prints what it found as one
JSON object: {"scalars": {tag: [[step, value], ...]}, "texts": {tag: [[step, text], ...]},
"text_plugin": {tag: plugin name}} (texts decoded as strictly as the text plugin decodes them:
UTF-8, an error otherwise), for tests/launcher/trainer/test_tensorboard.sh to compare.

  tb_read.py EVENT_FILE|DIR
"""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "tensors": 0})
acc.Reload()
tags = acc.Tags()
out = {"scalars": {}, "texts": {}, "text_plugin": {}}
for tag in tags["scalars"]:
    out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
for tag in tags["tensors"]:
    out["texts"][tag] = [[e.step, b"".join(e.tensor_proto.string_val).decode("utf-8")]
                         for e in acc.Tensors(tag)]
    out["text_plugin"][tag] = acc.SummaryMetadata(tag).plugin_data.plugin_name
json.dump(out, sys.stdout)
