#!/usr/bin/env bash
cd /work/wt/xproc25 && exec /work/notes/quiet.sh "$@"
