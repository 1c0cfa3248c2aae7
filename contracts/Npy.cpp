//===- Npy.cpp - Read and write NumPy .npy files --------------------------===//
//
// Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//   "\x93NUMPY" major minor, header length (2 bytes LE in 1.0, 4 bytes in 2.0 / 3.0),
//   header = a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
//   with spaces and ended by '\n', then the raw data.
// '<' and '=' descrs are read as-is: every host moec runs on is little-endian.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Npy.h"

#include "moec/contracts/Files.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

namespace moec {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlign = 64; // numpy's ARRAY_ALIGN: the data starts at a multiple of this

struct TypeInfo {
  NpyType type;
  const char *code; // descr without the byte-order character
  int bytes;
  const char *name;
};

// Indexed by NpyType: same order as the enum.
constexpr TypeInfo kTypes[] = {
    {NpyType::F32, "f4", 4, "float32"}, {NpyType::F16, "f2", 2, "float16"}, {NpyType::F64, "f8", 8, "float64"},
    {NpyType::I32, "i4", 4, "int32"},   {NpyType::I64, "i8", 8, "int64"},   {NpyType::I8, "i1", 1, "int8"},
    {NpyType::U8, "u1", 1, "uint8"},    {NpyType::Bool, "b1", 1, "bool"},
};

const TypeInfo &typeInfo(NpyType t) { return kTypes[static_cast<size_t>(t)]; }

[[noreturn]] void fail(const std::string &path, const std::string &reason) {
  throw std::runtime_error(path + ": " + reason);
}

/// Python's repr of a shape tuple: "()", "(3,)", "(2, 3)".
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

//===--- Reading ----------------------------------------------------------===//

struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Parses the header's dict literal: the three keys in any order, trailing comma and spaces optional.
class HeaderParser {
public:
  HeaderParser(const std::string &filePath, std::string headerText) : path(filePath), text(std::move(headerText)) {}

  Header parse() {
    std::optional<std::string> descr;
    std::optional<bool> fortranOrder;
    std::optional<std::vector<int64_t>> shape;
    skipSpace();
    expect('{');
    skipSpace();
    while (!consume('}')) {
      std::string key = parseString();
      skipSpace();
      expect(':');
      skipSpace();
      if (key == "descr")
        descr = parseString();
      else if (key == "fortran_order")
        fortranOrder = parseBool();
      else if (key == "shape")
        shape = parseShape();
      else
        error("unknown key '" + key + "'");
      skipSpace();
      if (!consume(',')) {
        expect('}');
        break;
      }
      skipSpace();
    }
    skipSpace();
    if (pos != text.size())
      error("unexpected text after the dict");
    if (!descr || !fortranOrder || !shape)
      error(std::string("missing key '") + (!descr ? "descr" : !fortranOrder ? "fortran_order" : "shape") + "'");
    return {*descr, *fortranOrder, *shape};
  }

private:
  [[noreturn]] void error(const std::string &what) const {
    fail(path, "malformed .npy header: " + what + " at offset " + std::to_string(pos) + " in \"" + text + "\"");
  }

  void skipSpace() {
    while (pos < text.size() && std::strchr(" \t\r\n", text[pos]))
      ++pos;
  }

  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c))
      error(std::string("expected '") + c + "'");
  }

  bool consumeWord(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }

  std::string parseString() {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      error("expected a quoted string");
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string::npos)
      error("unterminated string");
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }

  bool parseBool() {
    if (consumeWord("True"))
      return true;
    if (consumeWord("False"))
      return false;
    error("expected True or False");
  }

  std::vector<int64_t> parseShape() {
    std::vector<int64_t> shape;
    expect('(');
    skipSpace();
    while (!consume(')')) {
      shape.push_back(parseDim());
      skipSpace();
      if (!consume(',')) {
        expect(')');
        break;
      }
      skipSpace();
    }
    return shape;
  }

  int64_t parseDim() {
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos])))
      error("expected a non-negative dimension");
    int64_t value = 0;
    for (; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos) {
      int digit = text[pos] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        error("dimension too large");
      value = value * 10 + digit;
    }
    consume('L'); // Python 2 wrote long integers as 3L
    return value;
  }

  const std::string &path;
  std::string text;
  size_t pos = 0;
};

std::string supportedTypes() {
  std::string s;
  for (const TypeInfo &t : kTypes)
    s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

NpyType parseDescr(const std::string &path, const std::string &descr) {
  for (const TypeInfo &t : kTypes) {
    if (descr.size() != 3 || descr.compare(1, 2, t.code) != 0)
      continue;
    char order = descr[0];
    bool oneByte = t.bytes == 1; // byte order is meaningless, numpy writes '|'
    if (order == '<' || order == '=' || (oneByte && (order == '|' || order == '>')))
      return t.type;
    if (order == '>')
      fail(path, "big-endian arrays ('" + descr + "') are not supported; use arr.astype(arr.dtype.newbyteorder('<'))");
  }
  fail(path, "unsupported dtype '" + descr + "'; supported: " + supportedTypes());
}

/// Bytes of data an array of `shape` holds; fails if that does not fit in int64_t. An empty array (a 0 dim)
/// holds none, but its other dims must still multiply without overflow: NpyArray::elements() and every
/// stride computed from the shape rely on it (fuzz-npy found a (0, 46733841708, 87904, ...) shape).
int64_t dataBytes(const std::string &path, const std::vector<int64_t> &shape, int elementBytes) {
  int64_t total = elementBytes;
  bool empty = false;
  for (int64_t dim : shape) {
    empty |= dim == 0;
    if (dim != 0 && total > std::numeric_limits<int64_t>::max() / dim)
      fail(path, "shape " + shapeText(shape) + " is too large");
    total *= dim == 0 ? 1 : dim;
  }
  return empty ? 0 : total;
}

uint32_t readLittleEndian(const uint8_t *p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= uint32_t(p[i]) << (8 * i);
  return v;
}

//===--- Writing ----------------------------------------------------------===//

/// Magic, version, header length and the header, padded so the data that follows is aligned.
std::string headerImage(const NpyArray &array) {
  const TypeInfo &t = typeInfo(array.type);
  std::string dict = std::string("{'descr': '") + (t.bytes == 1 ? '|' : '<') + t.code +
                     "', 'fortran_order': False, 'shape': " + shapeText(array.shape) + ", }";
  // Header length counts the padding and the final '\n'.
  auto paddedLength = [&](size_t prefix) {
    size_t unpadded = prefix + dict.size() + 1;
    return (unpadded + kAlign - 1) / kAlign * kAlign - prefix;
  };
  // Version 1.0 unless the length does not fit its 2-byte field (thousands of dims), as numpy does.
  size_t lengthBytes = paddedLength(kMagicSize + 4) <= 0xffff ? 2 : 4;
  size_t length = paddedLength(kMagicSize + 2 + lengthBytes);

  std::string image(kMagic, kMagicSize);
  image += static_cast<char>(lengthBytes == 2 ? 1 : 2);
  image += '\0';
  for (size_t i = 0; i < lengthBytes; ++i)
    image += static_cast<char>((length >> (8 * i)) & 0xff);
  image += dict;
  image.append(length - dict.size() - 1, ' ');
  image += '\n';
  return image;
}

} // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

const char *npyTypeName(NpyType t) { return typeInfo(t).name; }

int npyTypeBytes(NpyType t) { return typeInfo(t).bytes; }

NpyArray readNpy(const std::string &path) {
  // Only a regular file: a FIFO (`--in x=fifo`) would block the read forever.
  std::vector<uint8_t> bytes = readRegularFileBytes(path);
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    fail(path, "not a .npy file (bad magic)");
  int major = bytes[kMagicSize], minor = bytes[kMagicSize + 1];
  if (major < 1 || major > 3)
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor));
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = kMagicSize + 2 + lengthBytes;
  if (bytes.size() < headerStart)
    fail(path, "truncated header");
  size_t headerLength = readLittleEndian(bytes.data() + kMagicSize + 2, lengthBytes);
  size_t dataStart = headerStart + headerLength;
  if (bytes.size() < dataStart)
    fail(path, "truncated header: expected " + std::to_string(headerLength) + " bytes, found " +
                   std::to_string(bytes.size() - headerStart));

  Header header = HeaderParser(path, std::string(bytes.begin() + headerStart, bytes.begin() + dataStart)).parse();
  NpyArray array;
  array.type = parseDescr(path, header.descr);
  if (header.fortranOrder)
    fail(path, "Fortran-order arrays are not supported; use np.ascontiguousarray");
  array.shape = std::move(header.shape);

  auto expected = static_cast<uint64_t>(dataBytes(path, array.shape, npyTypeBytes(array.type)));
  uint64_t found = bytes.size() - dataStart;
  std::string sizes = "expected " + std::to_string(expected) + " bytes of data, found " + std::to_string(found);
  if (found < expected)
    fail(path, "truncated: " + sizes);
  if (found > expected)
    fail(path, "trailing bytes after the data: " + sizes);
  // Reuse the buffer: drop the header in place rather than copying the data out.
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(dataStart));
  array.data = std::move(bytes);
  return array;
}

void writeNpy(const std::string &path, const NpyArray &array) {
  for (int64_t dim : array.shape)
    if (dim < 0)
      fail(path, "cannot write: negative dimension in shape " + shapeText(array.shape));
  uint64_t expected = static_cast<uint64_t>(dataBytes(path, array.shape, npyTypeBytes(array.type)));
  if (array.data.size() != expected)
    fail(path, "cannot write: shape " + shapeText(array.shape) + " of " + npyTypeName(array.type) + " needs " +
                   std::to_string(expected) + " bytes of data, the array holds " + std::to_string(array.data.size()));
  std::string header = headerImage(array);
  std::string_view data(reinterpret_cast<const char *>(array.data.data()), array.data.size());
  writeFileReplacing(path, {header, data});
}

} // namespace moec
