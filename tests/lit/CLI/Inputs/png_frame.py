"""Checks a picture the way a user sees it: png_frame.py FILE.png [--colour RRGGBB]...

Reads the PNG with zlib alone (8-bit grey, RGB, grey+alpha or RGBA; not interlaced), then fails, naming what
it found, unless
  - its corner pixel is white (moec's plots draw on white) and every pixel of a band BAND pixels wide along
    the four edges is that white: nothing (a label, a key, a tic) is drawn past the picture, where a viewer
    would cut it;
  - at least 3 % of the pixels are drawn (it rendered at all);
  - each --colour occurs in at least 200 pixels (the bars of that colour are there).
On success it prints one line: "frame clear: WxH, N drawn pixels, ...".
"""
import argparse
import struct
import sys
import zlib

BAND = 6


def pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        sys.exit(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}: not read here")
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line

    def rgb(x, y):
        px = rows[y][x * channels:(x + 1) * channels]
        if channels <= 2:
            return (px[0],) * 3
        return tuple(px[:3])
    return width, height, rgb


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("png")
    parser.add_argument("--colour", action="append", default=[])
    args = parser.parse_args()
    width, height, rgb = pixels(args.png)
    background = rgb(0, 0)
    if background != (255, 255, 255):
        sys.exit(f"{args.png}: the corner is {background}, not white")
    for y in range(height):
        edge = y < BAND or y >= height - BAND
        for x in (range(width) if edge else list(range(BAND)) + list(range(width - BAND, width))):
            if rgb(x, y) != background:
                sys.exit(f"{args.png}: pixel ({x}, {y}) of the {BAND}-pixel border is {rgb(x, y)}: something is "
                         f"drawn past the picture's edge")
    counts = {}
    drawn = 0
    for y in range(height):
        for x in range(width):
            p = rgb(x, y)
            if p != background:
                drawn += 1
                counts[p] = counts.get(p, 0) + 1
    if drawn < 0.03 * width * height:
        sys.exit(f"{args.png}: only {drawn} of {width * height} pixels drawn")
    found = []
    for colour in args.colour:
        want = tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))
        n = counts.get(want, 0)
        if n < 200:
            sys.exit(f"{args.png}: colour {colour} in {n} pixels (fewer than 200)")
        found.append(f"{colour} in {n} pixels")
    print(f"frame clear: {width}x{height}, {drawn} drawn pixels" + "".join(", " + f for f in found))


if __name__ == "__main__":
    main()
