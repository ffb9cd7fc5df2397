#!/bin/sh
# make_edits.sh regenerates the MP4 clips of this directory that exercise
# FFmpeg's edit-list and fragment timing (decode/mp4_edit_test.go), with
# the ffmpeg CLI (Debian 12, FFmpeg 5.1). The other clips here predate it.
set -eu
cd "$(dirname "$0")"
in="-hide_banner -loglevel error -y -f lavfi"
out="-threads 1 -fflags +bitexact -flags:v +bitexact -map_metadata -1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 2 s of 25 fps H.264 with 3 B-frames and one GOP.
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=2" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -pix_fmt yuv420p "$tmp/bf.mp4"
# Cut with -ss 0.5 -c copy: the edit list's media time (0.58 s) is not on
# a frame's pts, and 13 frames before it are pre-roll (decoded, not shown).
ffmpeg -hide_banner -loglevel error -y -ss 0.5 -i "$tmp/bf.mp4" -c copy $out h264_sscut.mp4
# Fragmented without empty_moov: the moov holds the first fragment's frames
# and mdhd's duration covers only them (0.8 s of 2 s).
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=2" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -g 20 -pix_fmt yuv420p -movflags frag_keyframe h264_fragmoov.mp4
