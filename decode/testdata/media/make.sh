#!/bin/sh
# make.sh regenerates the small real media files in this directory with the
# ffmpeg CLI (Debian 12, FFmpeg 5.1). They are committed so that tests and
# fuzz seeds do not depend on an encoder; keep the total under 2 MB.
set -eu
cd "$(dirname "$0")"
src() { # src W H SECONDS: moving pattern plus seeded temporal noise, scaled
	# last so that odd sizes survive (testsrc2 rounds its size to even).
	echo "testsrc2=size=320x240:rate=30:duration=$3,noise=alls=12:allf=t+u:all_seed=7,scale=$1:$2"
}
# enc IN... -- OUT...: lavfi inputs, then deterministic single-thread output flags.
in="-hide_banner -loglevel error -y -f lavfi"
out="-threads 1 -fflags +bitexact -flags:v +bitexact -map_metadata -1"
# H.264 with B-frames (pyramid), 1 s GOP, 3 s.
ffmpeg $in -i "$(src 320 240 3)" $out -c:v libx264 -preset veryfast -crf 30 -g 30 -sc_threshold 0 -bf 3 -pix_fmt yuv420p h264_bframes.mp4
# H.264 without B-frames, long GOP, a size x264 must crop in the SPS (coded 208x112).
ffmpeg $in -i "$(src 198 112 2)" $out -c:v libx264 -preset veryfast -crf 30 -g 250 -bf 0 -pix_fmt yuv420p h264_odd.mp4
# H.264 all-intra, 4:4:4.
ffmpeg $in -i "$(src 160 96 1)" $out -c:v libx264 -preset veryfast -crf 30 -g 1 -pix_fmt yuv444p h264_intra444.mp4
# HEVC with B-frames, moov before mdat.
ffmpeg $in -i "$(src 256 144 2)" $out -c:v libx265 -preset ultrafast -crf 32 -x265-params pools=none:frame-threads=1:log-level=error:keyint=24:bframes=3 -tag:v hvc1 -movflags +faststart hevc.mp4
# HEVC carrying an MD5 decoded-picture-hash SEI per picture (x265 hash=1),
# which FFmpeg checks: most damage to it is detected (decode/damaged_test.go).
ffmpeg $in -i "$(src 256 144 2)" $out -c:v libx265 -preset ultrafast -crf 32 -x265-params pools=none:frame-threads=1:log-level=error:keyint=24:bframes=3:hash=1 -tag:v hvc1 -movflags +faststart hevc_md5.mp4
# VP9 in WebM, odd size (chroma planes round up).
ffmpeg $in -i "$(src 255 143 2)" $out -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -row-mt 0 -crf 40 -b:v 0 -g 24 vp9.webm
# VP8 in WebM.
ffmpeg $in -i "$(src 176 144 1)" $out -c:v libvpx -deadline realtime -cpu-used 8 -crf 30 -b:v 300k -g 15 vp8.webm
# AV1 in MP4 (libaom realtime, tiny: AV1 encodes slowly).
ffmpeg $in -i "$(src 128 72 1)" $out -c:v libaom-av1 -usage realtime -cpu-used 8 -row-mt 0 -crf 45 -g 15 av1.mp4
# H.264 in Matroska with audio (the decoder must pick the video stream).
ffmpeg $in -i "$(src 160 120 1)" -f lavfi -i "sine=frequency=440:duration=1" $out -c:v libx264 -preset veryfast -crf 32 -g 12 -c:a libopus h264_audio.mkv
# Images: baseline 4:2:0 JPEG, 4:4:4 JPEG, PNG, lossy WebP.
ffmpeg $in -i "testsrc2=size=640x480:rate=1,noise=alls=20:allf=u:all_seed=3" $out -frames:v 1 -c:v mjpeg -q:v 4 -pix_fmt yuvj420p image420.jpg
ffmpeg $in -i "testsrc2=size=320x240:rate=1,noise=alls=20:allf=u:all_seed=4,scale=333:251" $out -frames:v 1 -c:v mjpeg -q:v 4 -pix_fmt yuvj444p image444.jpg
ffmpeg $in -i "testsrc2=size=200x150:rate=1" $out -frames:v 1 -c:v png -pix_fmt rgb24 image.png
ffmpeg $in -i "testsrc2=size=300x200:rate=1" $out -frames:v 1 -c:v libwebp -quality 60 image.webp
