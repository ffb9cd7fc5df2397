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
# CMAF fragments (trun version 1): negative composition offsets, which
# raise FFmpeg's dts_shift, so every pts is 1024 above dts + offset.
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=2" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -g 20 -pix_fmt yuv420p -movflags cmaf h264_cmaf.mp4
# An edit ending before the media does: the elst segment duration of a
# 2 s clip with a keyframe every 10 frames is cut to 1 s (1000 ticks of
# the movie timescale 1000, big-endian at 12 bytes into the elst box).
# FFmpeg reads 41 packets but discards the 16 past 1 s and shows 25.
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=2" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -g 10 -pix_fmt yuv420p h264_elsttail.mp4
off=$(grep -obUa elst h264_elsttail.mp4 | head -n 1 | cut -d: -f1)
printf '\000\000\003\350' | dd of=h264_elsttail.mp4 bs=1 seek=$((off + 12)) conv=notrunc status=none
# An edit ending between a P-frame and the B-frames decoded after it: 1 s
# with a fixed I P B B B pattern (b-adapt=0), the elst segment cut to
# 280 ms, 7 frames. FFmpeg discards the P-frame of pts 8 frames (past the
# end) but still decodes it, since the B-frames of pts 5 and 6, decoded
# after it, refer to it; it shows 7 frames.
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=1" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -x264-params b-adapt=0 -pix_fmt yuv420p h264_elsthidden.mp4
off=$(grep -obUa elst h264_elsthidden.mp4 | head -n 1 | cut -d: -f1)
printf '\000\000\001\030' | dd of=h264_elsthidden.mp4 bs=1 seek=$((off + 12)) conv=notrunc status=none
# A cut that starts without a keyframe: 2 s without B-frames, a keyframe
# every 25 frames, copied from 0.3 s on with -copyinkf, which keeps the
# 17 P-frames before the next keyframe. They refer to frames cut away:
# FFmpeg decodes them but outputs nothing before the keyframe. It goes in
# damaged/: TestIntactClipsHaveNoDamage decodes every clip here.
ffmpeg $in -i "testsrc2=size=128x96:rate=25:duration=2" $out -c:v libx264 -preset veryfast -crf 34 -bf 0 -g 25 -pix_fmt yuv420p "$tmp/p.mp4"
ffmpeg -hide_banner -loglevel error -y -i "$tmp/p.mp4" -ss 0.3 -c copy -copyinkf $out damaged/h264_nokey.mp4
# Open GOPs: 3 s of 25 fps, a keyframe every 11 to 13 frames. With
# x264's open-gop=1 the keyframes after the first are I-frames with a
# recovery point (not IDR), most followed in decode order by 1 or 2
# B-frames shown before them that refer to the GOP before (leading
# pictures); x265 does the same by default (CRA keyframes, each followed
# by a RASL picture). Decoding from a seek to such a keyframe, FFmpeg
# drops its leading pictures, and H.264 the frames of a short last GOP
# that it outputs only when draining (x264's last GOP here: its keyframe
# and 2 frames).
ffmpeg $in -i "testsrc2=size=96x64:rate=25:duration=3" $out -c:v libx264 -preset veryfast -crf 34 -bf 3 -g 12 -x264-params open-gop=1 -pix_fmt yuv420p h264_opengop.mp4
ffmpeg $in -i "testsrc2=size=96x64:rate=25:duration=3" $out -c:v libx265 -preset veryfast -crf 34 -g 12 -x265-params log-level=error -pix_fmt yuv420p -tag:v hvc1 hevc_opengop.mp4
