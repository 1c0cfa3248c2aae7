//===- Files.h - Reading and writing the files a user names ------*- C++ -*-===//
//
// Inputs and outputs named on the command line or in a bundle may be anything: a FIFO that would block
// a read forever, a device node that a temp-and-rename write would replace with a regular file. These
// read only regular files and never rename over anything but a regular file.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moec {

/// An open file descriptor, closed on destruction.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_;
};

/// The contents of `path`. Throws std::runtime_error naming the path: "'x' is not a regular file" for a
/// FIFO, device, socket or directory (opened without blocking, so a FIFO is reported, not waited on),
/// or "x: cannot open: <errno text>" (cannot read, ...).
std::string readRegularFile(const std::string &path);
std::vector<uint8_t> readRegularFileBytes(const std::string &path);

/// Writes `parts`, in order, as the contents of `path`. A regular file (or none) is replaced atomically:
/// the bytes go to a temp file next to it, renamed over it once complete, so readers never see a partial
/// file. A character device (/dev/null, a terminal) is written in place; any other existing non-regular
/// file (directory, FIFO, socket, block device) is refused: "'x' is not a regular file; not writing it".
/// Throws std::runtime_error naming the path ("x: cannot write: <errno text>").
void writeFileReplacing(const std::string &path, const std::vector<std::string_view> &parts);

} // namespace moec
