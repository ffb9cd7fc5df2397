#!/bin/sh
# make_rotate.sh regenerates the clips of this directory whose display
# matrix (the MP4 tkhd matrix) turns the picture (decode/rotate_video_test.go,
# internal/av/rotate_test.go), with the ffmpeg CLI (Debian 12, FFmpeg 5.1).
# FFmpeg 5.1 writes the matrix only when it copies the stream: each clip is
# encoded first, then copied with -metadata:s:v rotate=N. The 5.1 mov muxer
# and the 5.1 CLI disagree on the sense of N: the CLI shows a clip tagged
# rotate=90 turned counterclockwise (transpose=cclock), one tagged 270
# turned clockwise (transpose=clock), one tagged 180 flipped both ways.
set -eu
cd "$(dirname "$0")"
in="-hide_banner -loglevel error -y -f lavfi"
out="-threads 1 -fflags +bitexact -flags:v +bitexact -map_metadata -1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# tag FILE N: copy $tmp/FILE to FILE with a display matrix from rotate=N.
tag() {
	ffmpeg -hide_banner -loglevel error -y -i "$tmp/$1" -c copy $out -metadata:s:v rotate=$2 "$1"
}
# 10 frames of 64x48 testsrc2 in four pixel formats, for FrameMD5s against
# `ffmpeg -i F -map 0:v -f framemd5 -`.
src="testsrc2=size=64x48:rate=25:duration=0.4"
enc="-c:v libx264 -preset veryfast -crf 30 -bf 2"
ffmpeg $in -i "$src" $out $enc -pix_fmt yuv420p "$tmp/rot90_420.mp4"
ffmpeg $in -i "$src" $out $enc -pix_fmt yuvj420p "$tmp/rot90_j420.mp4"
ffmpeg $in -i "$src" $out $enc -pix_fmt yuv420p10le "$tmp/rot270_420p10.mp4"
ffmpeg $in -i "$src" $out $enc -pix_fmt yuv444p "$tmp/rot180_444.mp4"
ffmpeg $in -i "$src" $out $enc -pix_fmt yuv422p "$tmp/rot90_422.mp4"
tag rot90_420.mp4 90
tag rot90_j420.mp4 90
tag rot270_420p10.mp4 270
tag rot180_444.mp4 180
tag rot90_422.mp4 90
# 3 frames of a 64x48 picture with a red top-left, green top-right, blue
# bottom-left and white bottom-right quadrant, stored turned the other way
# from what the matrix says (as a phone stores a portrait video), so the
# upright picture is the original one.
quad="color=white:size=64x48:rate=25:duration=0.12,drawbox=x=0:y=0:w=32:h=24:color=red:t=fill,drawbox=x=32:y=0:w=32:h=24:color=lime:t=fill,drawbox=x=0:y=24:w=32:h=24:color=blue:t=fill"
qenc="-c:v libx264 -preset veryfast -crf 20 -pix_fmt yuv420p"
ffmpeg $in -i "$quad,transpose=clock" $out $qenc "$tmp/upright90.mp4"
ffmpeg $in -i "$quad,hflip,vflip" $out $qenc "$tmp/upright180.mp4"
ffmpeg $in -i "$quad,transpose=cclock" $out $qenc "$tmp/upright270.mp4"
tag upright90.mp4 90
tag upright180.mp4 180
tag upright270.mp4 270
# 2 frames of 16x16 packed 4:2:2 (uyvy422, QuickTime's 2vuy) turned 180:
# a packed format turn_frame refuses to turn (4 bytes per 2 pixels). In
# refused/, away from the clips every decoder test takes (rawvideo is not
# among the default codecs).
ffmpeg $in -i "testsrc=size=16x16:rate=25:duration=0.08" $out -c:v rawvideo -pix_fmt uyvy422 -tag:v 2vuy "$tmp/rot180_uyvy.mov"
mkdir -p refused
ffmpeg -hide_banner -loglevel error -y -i "$tmp/rot180_uyvy.mov" -c copy $out -metadata:s:v rotate=180 refused/rot180_uyvy.mov
