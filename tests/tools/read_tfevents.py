#!/usr/bin/env python3
"""An event-file reader that shares no code with expctl, for its TensorBoard tests.

Usage: read_tfevents.py PROTO_PYTHON_DIR PATH...

PROTO_PYTHON_DIR holds tb_event_pb2.py, generated from tests/tools/tb_event.proto by
`protoc --python_out`. Each PATH is an event file or a folder searched recursively for files whose
name contains "tfevents" (as TensorBoard does). Every TFRecord's length and data CRCs are checked
with the crc32c module (python3-crc32c), every record is decoded with the generated classes, and
the result is printed as JSON:

  {"files": [{"path", "records", "crc_errors", "truncated", "unknown_fields", "file_version",
              "session_starts": [step, ...],
              "events": [{"step", "wall_time", "tag", "value"}, ...]}]}

`file_version` is that of the file's first record (null when the first record has none); one
entry of `events` per Summary.Value; a non-finite value is the string "nan", "inf" or "-inf".
"""
import json
import math
import os
import struct
import sys

import crc32c


def masked_crc(data):
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob, report):
    """Yields each record's data; counts CRC errors and a truncated tail in `report`."""
    offset = 0
    while offset < len(blob):
        if len(blob) - offset < 12:
            report["truncated"] = True
            return
        header = blob[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[offset + 8:offset + 12])
        if masked_crc(header) != length_crc:
            report["crc_errors"] += 1
            return  # the length cannot be trusted: nothing after it can be framed
        data = blob[offset + 12:offset + 12 + length]
        footer = blob[offset + 12 + length:offset + 16 + length]
        if len(data) < length or len(footer) < 4:
            report["truncated"] = True
            return
        if masked_crc(data) != struct.unpack("<I", footer)[0]:
            report["crc_errors"] += 1
        report["records"] += 1
        yield data
        offset += 16 + length


def number(value):
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def unknown_field_count(message):
    count = len(message.UnknownFields())
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        items = value if field.label == field.LABEL_REPEATED else [value]
        count += sum(unknown_field_count(item) for item in items)
    return count


def read_file(path, pb2):
    report = {"path": path, "records": 0, "crc_errors": 0, "truncated": False, "unknown_fields": 0,
              "file_version": None, "session_starts": [], "events": []}
    with open(path, "rb") as stream:
        blob = stream.read()
    for index, data in enumerate(records(blob, report)):
        event = pb2.Event()
        event.ParseFromString(data)
        report["unknown_fields"] += unknown_field_count(event)
        if index == 0 and event.WhichOneof("what") == "file_version":
            report["file_version"] = event.file_version
        if event.WhichOneof("what") == "session_log" and event.session_log.status == pb2.SessionLog.START:
            report["session_starts"].append(event.step)
        if event.WhichOneof("what") == "summary":
            for value in event.summary.value:
                report["events"].append({"step": event.step, "wall_time": event.wall_time, "tag": value.tag,
                                         "value": number(value.simple_value)})
    return report


def event_files(path):
    if os.path.isfile(path):
        return [path]
    found = []
    for folder, _, names in os.walk(path):
        found.extend(os.path.join(folder, name) for name in names if "tfevents" in name)
    return sorted(found)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    sys.path.insert(0, argv[1])
    import tb_event_pb2  # generated at test time

    files = [read_file(path, tb_event_pb2) for target in argv[2:] for path in event_files(target)]
    json.dump({"files": files}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
