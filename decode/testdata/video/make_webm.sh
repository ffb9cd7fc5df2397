#!/bin/sh
# make_webm.sh regenerates the WebM/Matroska clips of this directory that
# decode/webm_compat_test.go compares with FFmpeg 5.1's matroska demuxer,
# with the ffmpeg CLI (Debian 12, FFmpeg 5.1) and python3. FFmpeg never
# writes laced video, header stripping or clusters of unknown size (as
# mkvmerge and browsers may), a Projection, CodecDelay on a video track,
# or a block of a track Tracks does not list: those clips are ffmpeg
# output rewritten by the small EBML editor below (mkvedit), which drops
# SeekHead, Cues, Void and CRC-32 elements (their offsets no longer hold)
# and applies the edits its arguments name.
set -eu
cd "$(dirname "$0")"
in="-hide_banner -loglevel error -y -f lavfi"
out="-threads 1 -fflags +bitexact -flags:v +bitexact -map_metadata -1"
src="testsrc2=size=96x64:rate=25:duration=1"
vp9="-c:v libvpx-vp9 -b:v 100k -g 12"
h264="-c:v libx264 -preset veryfast -crf 34 -pix_fmt yuv420p -g 12"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mkvedit.py" <<'EOF'
import struct, sys

SEGMENT, CLUSTER, TRACKS, ENTRY, GROUP, INFO, VIDEO = 0x18538067, 0x1F43B675, 0x1654AE6B, 0xAE, 0xA0, 0x1549A966, 0xE0
SIMPLE, BLOCK, REF, BDUR, TIME, TCS, DUR = 0xA3, 0xA1, 0xFB, 0x9B, 0xE7, 0x2AD7B1, 0x4489
MASTER = {SEGMENT, CLUSTER, TRACKS, ENTRY, GROUP, INFO, VIDEO}
LEVEL1 = {CLUSTER, 0x1C53BB6B, 0x114D9B74, INFO, TRACKS, 0x1043A770, 0x1254C367, 0x1941A469}
DROP = {0x114D9B74, 0x1C53BB6B, 0xEC, 0xBF}  # SeekHead, Cues, Void, CRC-32


def vint(b, i, marker=False):
    n = 1
    while not b[i] & (0x80 >> (n - 1)):
        n += 1
    v = b[i] if marker else b[i] & (0xFF >> n)
    for k in range(1, n):
        v = v << 8 | b[i + k]
    return v, n


def size(n):
    k = 1
    while n >= (1 << (7 * k)) - 1:
        k += 1
    return (n | 1 << (7 * k)).to_bytes(k, "big")


# A tree of [id, bytes or children]; a cluster of unknown size ends at
# the next Segment child.
def parse(b, i, end, open_cluster=False):
    out = []
    while i < end:
        eid, n = vint(b, i, True)
        if open_cluster and eid in LEVEL1:
            return out, i
        sz, m = vint(b, i + n)
        body = i + n + m
        unknown = sz == (1 << (7 * m)) - 1
        stop = end if unknown else min(body + sz, end)
        if eid in MASTER:
            kids, stop = parse(b, body, stop, unknown and eid == CLUSTER)
            out.append([eid, kids])
        elif eid not in DROP:
            out.append([eid, b[body:stop]])
        i = stop
    return out, i


def ser(nodes, unknown=()):  # an id of None writes its bytes as they are
    out = b""
    for eid, body in nodes:
        if eid is None:
            out += body
            continue
        data = ser(body, unknown) if isinstance(body, list) else body
        head = b"\x01\xff\xff\xff\xff\xff\xff\xff" if eid in unknown else size(len(data))
        out += eid.to_bytes((eid.bit_length() + 7) // 8, "big") + head + data
    return out


def child(nodes, eid):
    return next((n for n in nodes if n[0] == eid), None)


def uint(n):
    return int.from_bytes(n[1], "big") if n else 0


def parts(block):  # track, timestamp, flags, payload
    track, n = vint(block, 0)
    return track, struct.unpack(">h", block[n:n + 2])[0], block[n + 2], block[n + 3:]


def block(track, rel, flags, payload):
    return bytes([0x80 | track]) + struct.pack(">h", rel) + bytes([flags]) + payload


def lace(kind, frames):
    if kind == "fixed":  # pad each H.264 frame to one size with a filler NAL unit
        big = max(len(f) for f in frames) + 6
        frames = [f + (big - len(f) - 4).to_bytes(4, "big") + b"\x0c" + b"\xff" * (big - len(f) - 6) + b"\x80" for f in frames]
        return 0x04, bytes([len(frames) - 1]), frames
    if kind == "xiph":
        head = b"".join(b"\xff" * (len(f) // 255) + bytes([len(f) % 255]) for f in frames[:-1])
        return 0x02, bytes([len(frames) - 1]) + head, frames
    head = size(len(frames[0]))
    for a, z in zip(frames[:-2], frames[1:-1]):
        d = len(z) - len(a)
        k = 1
        while abs(d) >= (1 << (7 * k - 1)) - 1:
            k += 1
        head += (d + (1 << (7 * k - 1)) - 1 | 1 << (7 * k)).to_bytes(k, "big")
    return 0x06, bytes([len(frames) - 1]) + head, frames


def main():
    src, dst, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
    b = open(src, "rb").read()
    top, _ = parse(b, 0, len(b))
    seg = child(top, SEGMENT)[1]
    info, tracks = child(seg, INFO)[1], child(seg, TRACKS)[1]
    video = next(e for e in tracks if uint(child(e[1], 0x83)) == 1)
    vnum = uint(child(video[1], 0xD7))
    clusters = [c[1] for c in seg if c[0] == CLUSTER]
    vblocks = lambda c: [n for n in c if n[0] == SIMPLE and parts(n[1])[0] == vnum]
    unknown = ()
    while ops:
        op, ops = ops[0], ops[1:]
        if op == "unknown":  # Segment and Clusters of unknown size
            unknown = (SEGMENT, CLUSTER)
        elif op == "noduration":
            info[:] = [n for n in info if n[0] != DUR]
        elif op == "nodefaultdur":
            video[1] = [n for n in video[1] if n[0] != 0x23E383]
        elif op == "codecdelay":  # codecdelay NS
            video[1].append([0x56AA, int(ops[0]).to_bytes(4, "big")])
            ops = ops[1:]
        elif op == "videoel":  # videoel HEX: elements added to the Video element
            child(video[1], VIDEO)[1].append([None, bytes.fromhex(ops[0])])
            ops = ops[1:]
        elif op == "tcs":  # tcs NS: another TimestampScale, every timestamp converted
            old, new = uint(child(info, TCS)) or 1000000, int(ops[0])
            ops = ops[1:]
            child(info, TCS)[1] = new.to_bytes(4, "big")
            if child(info, DUR):
                child(info, DUR)[1] = struct.pack(">d", struct.unpack(">d", child(info, DUR)[1])[0] * old / new)
            for c in clusters:
                t = uint(child(c, TIME))
                nt = t * old // new
                child(c, TIME)[1] = nt.to_bytes(8, "big")
                for n in c:
                    if n[0] == SIMPLE:
                        tr, rel, fl, pl = parts(n[1])
                        n[1] = block(tr, round((t + rel) * old / new) - nt, fl, pl)
        elif op == "lace":  # lace xiph|ebml|fixed N: N video frames per block, a keyframe first
            kind, per = ops[0], int(ops[1])
            ops = ops[2:]
            for c in clusters:
                out, run = [], []

                def flush():
                    if len(run) > 1:
                        tr, rel, fl, _ = parts(run[0][1])
                        bits, head, frames = lace(kind, [parts(r[1])[3] for r in run])
                        out.append([SIMPLE, block(tr, rel, fl & ~0x06 | bits, head + b"".join(frames))])
                    else:
                        out.extend(run)
                    run.clear()

                for n in c:
                    if n in vblocks(c):
                        if parts(n[1])[2] & 0x80:
                            flush()
                        run.append(n)
                        if len(run) == per:
                            flush()
                    else:
                        flush()
                        out.append(n)
                flush()
                c[:] = out
        elif op == "blockgroups":  # video SimpleBlocks become BlockGroups
            for c in clusters:
                prev = 0
                for k, n in enumerate(c):
                    if n in vblocks(c):
                        tr, rel, fl, pl = parts(n[1])
                        kids = [[BLOCK, block(tr, rel, fl & 0x7F, pl)]]
                        if not fl & 0x80:
                            kids.append([REF, (prev - rel).to_bytes(8, "big", signed=True)])
                        c[k], prev = [GROUP, kids], rel
        elif op == "blockdur":  # blockdur TICKS: a BlockDuration in every BlockGroup
            for c in clusters:
                for n in c:
                    if n[0] == GROUP:
                        n[1].append([BDUR, int(ops[0]).to_bytes(2, "big")])
            ops = ops[1:]
        elif op == "headerstrip":  # headerstrip N: the first N bytes of every video frame in the header
            common = {parts(n[1])[3][: int(ops[0])] for c in clusters for n in vblocks(c)}
            assert len(common) == 1, "the frames do not share their first bytes"
            for c in clusters:
                for n in vblocks(c):
                    tr, rel, fl, pl = parts(n[1])
                    n[1] = block(tr, rel, fl, pl[int(ops[0]) :])
            comp = [[0x4254, b"\x03"], [0x4255, common.pop()]]
            video[1].append([0x6D80, [[0x6240, [[0x5031, b"\x00"], [0x5032, b"\x01"], [0x5033, b"\x00"], [0x5034, comp]]]]])
            ops = ops[1:]
        elif op == "insertblock":  # insertblock TRACK HEX: a SimpleBlock after the 2nd block of every cluster
            for c in clusters:
                ks = [k for k, n in enumerate(c) if n[0] in (SIMPLE, GROUP)]
                if len(ks) > 2:
                    c.insert(ks[1] + 1, [SIMPLE, block(int(ops[0]), parts(c[ks[1]][1])[1], 0, bytes.fromhex(ops[1]))])
            ops = ops[2:]
        else:
            sys.exit("mkvedit: unknown edit " + op)
    open(dst, "wb").write(ser(top, unknown))


main()
EOF
edit() { python3 "$tmp/mkvedit.py" "$@"; }

# Muxed by FFmpeg as written: live (Segment of unknown size, no Cues, no
# Duration; written to a pipe with -f webm, the same bytes), Cues moved to
# the front.
ffmpeg $in -i "$src" $out $vp9 -live 1 vp9_live.webm
ffmpeg $in -i "$src" $out $vp9 -cues_to_front 1 vp9_cuesfront.webm
# Alpha: BlockGroups with BlockAdditions and ReferenceBlocks.
ffmpeg $in -i "$src" $out $vp9 -pix_fmt yuva420p vp9_alpha.webm
ffmpeg $in -i "$src" $out -c:v libvpx -b:v 100k -g 12 -auto-alt-ref 0 -pix_fmt yuva420p vp8_alpha.webm
# VP8 with alt-ref (invisible) frames, which FFmpeg's libvpx wrapper merges.
ffmpeg $in -i "$src" $out -c:v libvpx -b:v 100k -g 12 -auto-alt-ref 1 -lag-in-frames 16 vp8_altref.webm
# An Opus track before the video track; one frame alone.
ffmpeg $in -i "$src" -f lavfi -i "sine=d=1" $out -map 1:a -map 0:v $vp9 -c:a libopus -b:a 8k vp9_opusfirst.webm
ffmpeg $in -i "testsrc2=size=96x64:rate=25:duration=0.04" $out $vp9 vp9_oneframe.webm
# Two video tracks, FlagDefault on the second only: FFmpeg decodes the
# second (av_find_best_stream), which ffprobe -select_streams v:0 is not.
ffmpeg $in -i "$src" -f lavfi -i "testsrc=size=64x48:rate=30:duration=1" $out -map 0:v -map 1:v $h264 \
	-disposition:v:0 0 -disposition:v:1 default h264_2video.mkv
# As a browser's MediaRecorder writes: Segment and Clusters of unknown
# size, no Cues, no Duration, audio first, the first cluster at 3 s.
ffmpeg $in -i "$src" -f lavfi -i "sine=d=1" $out -map 1:a -map 0:v $vp9 -c:a libopus -b:a 8k -output_ts_offset 3 "$tmp/rec.webm"
edit "$tmp/rec.webm" vp9_rec.webm unknown noduration
# Rotated by a rectangular Projection's ProjectionPoseRoll of 90 degrees,
# which FFmpeg 5.1 turns into a display matrix (ffmpeg autorotates).
edit vp9_live.webm vp9_roll90.webm videoel 76708F767181007675884056800000000000
# CodecDelay (80 ms) on the video track: FFmpeg subtracts it from every
# timestamp.
edit vp9_live.webm vp9_codecdelay.webm codecdelay 80000000
# An empty SimpleBlock of the video track, which FFmpeg skips.
edit vp9_live.webm vp9_emptyblock.webm insertblock 1 ""

# H.264 without B-frames, laced 3 frames to a block (a keyframe starts a
# block): Xiph, EBML and fixed-size lacing (the frames padded with filler
# NAL units to one size); without DefaultDuration FFmpeg leaves the 2nd
# and 3rd frame of each block without a timestamp.
ffmpeg $in -i "$src" $out $h264 -bf 0 "$tmp/bf0.mkv"
edit "$tmp/bf0.mkv" h264_lace_xiph.mkv lace xiph 3
edit "$tmp/bf0.mkv" h264_lace_ebml.mkv lace ebml 3
edit "$tmp/bf0.mkv" h264_lace_fixed.mkv lace fixed 3
edit "$tmp/bf0.mkv" h264_lace_nodur.mkv nodefaultdur lace xiph 3
# EBML-laced BlockGroups of 4 frames with a BlockDuration of 100 ms: the
# frames are 25 ms apart, whatever DefaultDuration says.
edit "$tmp/bf0.mkv" h264_lacegroup.mkv lace ebml 4 blockgroups blockdur 100
# H.264 with B-frames: TimestampScale 100 us, and 333.333 us (not a
# whole fraction of a second: FFmpeg's time base is 333333/1000000000);
# header stripping of the 2 bytes every frame starts with (the high bytes
# of the first NAL unit's length), as mkvmerge writes it.
ffmpeg $in -i "$src" $out $h264 -bf 3 "$tmp/bf3.mkv"
edit "$tmp/bf3.mkv" h264_tcs100us.mkv tcs 100000
edit "$tmp/bf3.mkv" h264_tcs333us.mkv tcs 333333
edit "$tmp/bf3.mkv" h264_headerstrip.mkv headerstrip 2
# An open-GOP clip (x264's open-gop: I-frames without IDR, followed in
# decode order by B-frames shown before them) cut as users cut it, with
# -ss 1 -c copy: the cut starts at the keyframe of 0.96 s, and the 2
# leading B-frames decoded after it, which refer to frames cut away, are
# blocks timed before 0. FFmpeg gives them no pts and shows none of them.
ffmpeg $in -i "testsrc2=size=96x64:rate=25:duration=2" $out $h264 -bf 3 -x264-params open-gop=1 "$tmp/opengop.mp4"
ffmpeg -hide_banner -loglevel error -y -ss 1 -i "$tmp/opengop.mp4" -c copy $out h264_opengop_cut.mkv

# Damaged: cut inside the 2nd cluster after some of its blocks, cut
# inside the 1st, and a block of a track Tracks does not list, after
# which FFmpeg drops the rest of its cluster.
head -c 9000 vp9_live.webm >damaged/vp9_cut.webm
head -c 3300 vp9_live.webm >damaged/vp9_cutfirst.webm
edit vp9_live.webm damaged/vp9_badtrack.webm insertblock 9 00112233
