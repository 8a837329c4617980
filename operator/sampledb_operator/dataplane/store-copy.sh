# shellcheck shell=bash
# sampledb data plane: copies of logical backups (backup.sh's files) in the object store, sourced by
# backup.sh and restore.sh after lib.sh; and the names in Barman Cloud's WAL archive (store_wal_names),
# sourced for that by archive-wal.sh and recover.sh.
#
# Layout: <destination>/<server>/logical/<reason>/<name>.{dump,globals.sql,json}, beside Barman
# Cloud's wals/ and base/ of the same server (the same database), which Barman never reads. The .json
# is written last and deleted first: a copy exists exactly when its .json does, as on the volume.
# The files are moved with boto3 (Barman Cloud's own S3 client, in its virtualenv) by the Python
# program below: multipart uploads for large dumps, the store's CA from AWS_CA_BUNDLE, the keys from
# AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (never on a command line, never printed), every call with
# connect and read timeouts and bounded retries. Store settings: lib.sh's (store_check).

# The program of store_objects (Python standard library and boto3 only). Commands (stdout: one line per
# answer; a failure: exit 1 and one line on stderr; a missing object: exit 3):
#   put BUCKET PREFIX SUB DIR FILE...  upload DIR/FILE to PREFIX+SUB/FILE, in the order given
#   get BUCKET PREFIX SUB DIR FILE...  download PREFIX+SUB/FILE into DIR/FILE
#   find BUCKET PREFIX NAME            the SUB (a reason) whose folder holds NAME.json
#   prune BUCKET PREFIX SUB KEEP       delete all but the KEEP newest copies in PREFIX+SUB/ (by their
#                                      .json's modification time); print each name deleted
#   names BUCKET PREFIX AFTER          every key under PREFIX that sorts after PREFIX+AFTER, without
#                                      PREFIX, in order
# shellcheck disable=SC2016  # Python text, not shell
SDB_STORE_PY='
import os, sys

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

SUFFIXES = (".json", ".dump", ".globals.sql")

def client():
    endpoint = os.environ.get("SAMPLEDB_S3_ENDPOINT") or None
    style = os.environ.get("SAMPLEDB_S3_ADDRESSING_STYLE") or ("path" if endpoint else "auto")
    config = Config(s3={"addressing_style": style}, connect_timeout=10, read_timeout=120,
                    retries={"max_attempts": 5, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint, config=config)

def keys(s3, bucket, prefix):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.extend(page.get("Contents") or [])
    return out

def missing(error):
    return isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey")

def main(argv):
    command, bucket, prefix = argv[0], argv[1], argv[2]
    s3 = client()
    if command in ("put", "get", "prune"):
        prefix, argv = prefix + argv[3] + "/", argv[1:]
    if command == "put":
        folder = argv[3]
        for name in argv[4:]:
            s3.upload_file(os.path.join(folder, name), bucket, prefix + name)
            size = s3.head_object(Bucket=bucket, Key=prefix + name)["ContentLength"]
            if size != os.path.getsize(os.path.join(folder, name)):
                raise RuntimeError("the store holds %d bytes of %s, not %d" % (size, prefix + name, os.path.getsize(os.path.join(folder, name))))
            print("put %s %d" % (name, size))
    elif command == "get":
        folder = argv[3]
        for name in argv[4:]:
            try:
                s3.download_file(bucket, prefix + name, os.path.join(folder, name))
            except ClientError as error:
                if missing(error):
                    print("no object %s" % (prefix + name), file=sys.stderr)
                    return 3
                raise
            print("got %s" % name)
    elif command == "find":
        ends = "/" + argv[3] + ".json"
        found = sorted(o["Key"][len(prefix):-len(ends)] for o in keys(s3, bucket, prefix) if o["Key"].endswith(ends))
        found = [sub for sub in found if sub and "/" not in sub]
        if not found:
            print("no copy %s under %s" % (argv[3], prefix), file=sys.stderr)
            return 3
        print(found[-1])
    elif command == "prune":
        keep = int(argv[3])
        listed = keys(s3, bucket, prefix)
        copies = sorted((o["LastModified"], o["Key"][len(prefix):-5]) for o in listed
                        if o["Key"].endswith(".json") and "/" not in o["Key"][len(prefix):])
        for _, name in copies[: max(len(copies) - keep, 0)]:
            for suffix in SUFFIXES:
                s3.delete_object(Bucket=bucket, Key=prefix + name + suffix)
            print("deleted %s" % name)
    elif command == "names":
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                              StartAfter=prefix + argv[3])
        for page in pages:
            for o in page.get("Contents") or []:
                print(o["Key"][len(prefix):])
    else:
        print("unknown command %s" % command, file=sys.stderr)
        return 2
    return 0

try:
    sys.exit(main(sys.argv[1:]))
except (BotoCoreError, ClientError, OSError, RuntimeError) as error:
    print(" ".join(str(error).split()), file=sys.stderr)
    sys.exit(1)
'

# store_python: print the Python interpreter with boto3 (the one Barman Cloud's commands run with, else
# python3 on PATH when it imports boto3); false if there is none.
store_python() {
    barman_python && return 0
    if command -v python3 >/dev/null 2>&1 && python3 -c 'import boto3' >/dev/null 2>&1; then
        printf 'python3'
        return 0
    fi
    return 1
}

# store_objects COMMAND ARGS...: run SDB_STORE_PY's COMMAND with the bucket and key prefix of
# DEST/SERVER/logical/ (store_check's DEST and SERVER) in front of ARGS.
# Its stderr goes to $SDB_TMP/store.err.
store_objects() {
    store_program logical "$@"
}

# store_wal_names AFTER: the names under DEST/SERVER/wals/ that sort after AFTER (e.g.
# "0000000100000000/000000010000000000000004"), one per line: "<timeline+log>/<segment>[.partial][.gz]",
# backup labels and "<timeline>.history.gz". Its stderr goes to $SDB_TMP/store.err.
store_wal_names() {
    store_program wals names "$1"
}

# store_program FOLDER COMMAND ARGS...: SDB_STORE_PY's COMMAND under DEST/SERVER/FOLDER/.
store_program() {
    local py folder=$1 command=$2 bucket path
    shift 2
    py=$(store_python) || {
        printf 'no Python with boto3 (Barman Cloud) in the image\n' >"$SDB_TMP/store.err"
        return 1
    }
    bucket=${DEST#s3://}
    bucket=${bucket%%/*}
    path=${DEST#"s3://$bucket"}
    path=${path#/}
    "$py" -c "$SDB_STORE_PY" "$command" "$bucket" "${path:+$path/}$SERVER/$folder/" "$@" 2>"$SDB_TMP/store.err"
}

# store_failure: the reason in store_objects' stderr, on one line, scrubbed of the keys.
store_failure() {
    scrub "$(one_line "$(tail -n1 -- "$SDB_TMP/store.err" 2>/dev/null || true)")"
}
