#!/bin/sh
# make_tracks.sh regenerates the MP4 clips of this directory with two
# video tracks (internal/mp4/decode_test.go, TestParseMP4PicksFFmpegTrack), where
# FFmpeg decodes the second, and the refused clip with MPEG-2 video in an
# MPEG-4 sample entry, with the ffmpeg CLI (Debian 12, FFmpeg 5.1).
# FFmpeg's libraries decode the stream av_find_best_stream picks: of
# those scoring most, a point for the default disposition (the tkhd
# enabled flag) and one for not being for the hearing or visually
# impaired (a kind box with a caption or description role), the one of
# the highest bit rate. (The ffmpeg CLI without -map takes the largest
# picture of the default ones.) In each clip, FFmpeg decodes the second
# track; one track is 1 s of 160x120 at 25 fps, of the larger bit rate,
# the other 1 s of 64x48 at 10 fps.
set -eu
cd "$(dirname "$0")"
in="-hide_banner -loglevel error -y -f lavfi"
out="-threads 1 -fflags +bitexact -flags:v +bitexact -map_metadata -1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
enc="-c:v libx264 -preset veryfast -bf 2 -pix_fmt yuv420p"
ffmpeg $in -i "testsrc2=size=160x120:rate=25:duration=1" $out $enc -crf 30 -g 25 "$tmp/big.mp4"
ffmpeg $in -i "testsrc=size=64x48:rate=10:duration=1" $out $enc -crf 34 -g 10 "$tmp/small.mp4"
# Both tracks default, the small one first: the big one has the larger
# bit rate.
ffmpeg -hide_banner -loglevel error -y -i "$tmp/small.mp4" -i "$tmp/big.mp4" -map 0:v -map 1:v -c copy $out h264_2video_rate.mp4
# The big one first but not default (its tkhd enabled flag cleared).
ffmpeg -hide_banner -loglevel error -y -i "$tmp/big.mp4" -i "$tmp/small.mp4" -map 0:v -map 1:v -c copy $out \
	-disposition:v:0 0 -disposition:v:1 default h264_2video_disabled.mp4
# Both default, the big one first with a kind box for the visually
# impaired (role "description").
ffmpeg -hide_banner -loglevel error -y -i "$tmp/big.mp4" -i "$tmp/small.mp4" -map 0:v -map 1:v -c copy $out \
	-disposition:v:0 default+visual_impaired -disposition:v:1 default h264_2video_kind.mp4
# MPEG-2 video in an MPEG-4 sample entry (mp4v, its esds naming MPEG-2):
# FFmpeg reads it as mpeg2video, which datahelix does not decode.
ffmpeg $in -i "testsrc2=size=64x48:rate=25:duration=1" $out -c:v mpeg2video -bf 2 -g 12 refused/mpeg2_mp4v.mp4
