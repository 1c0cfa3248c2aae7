//===- Files.cpp - Reading and writing the files a user names -------------===//
#include "moec/contracts/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec {

namespace {

/// "x.npy: cannot open: No such file or directory", as readNpy has always said.
[[noreturn]] void fail(const std::string &what, const std::string &path, int err) {
  throw std::runtime_error(path + ": cannot " + what + ": " + std::strerror(err));
}

[[noreturn]] void notRegular(const std::string &path, const char *consequence) {
  throw std::runtime_error("'" + path + "' is not a regular file" + consequence);
}


template <typename Buffer> Buffer readRegular(const std::string &path) {
  // O_NONBLOCK: open(2) of a FIFO without a writer would wait forever; the fstat below rejects it.
  Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file)
    fail("open", path, errno);
  struct stat st;
  if (::fstat(file.get(), &st) != 0)
    fail("read", path, errno);
  if (!S_ISREG(st.st_mode))
    notRegular(path, "");
  Buffer bytes(size_t(st.st_size), 0);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(file.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail("read", path, errno);
    if (n == 0)
      break; // shrank while we read
    done += size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

/// Writes every part to `fd`; returns 0 or an errno.
int writeAll(int fd, const std::vector<std::string_view> &parts) {
  for (std::string_view part : parts)
    for (size_t done = 0; done < part.size();) {
      ssize_t n = ::write(fd, part.data() + done, part.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno;
      done += size_t(n);
    }
  return 0;
}

} // namespace

std::string readRegularFile(const std::string &path) { return readRegular<std::string>(path); }

std::vector<uint8_t> readRegularFileBytes(const std::string &path) { return readRegular<std::vector<uint8_t>>(path); }

void writeFileReplacing(const std::string &path, const std::vector<std::string_view> &parts) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode))
      notRegular(path, "; not writing it");
    // A character device (/dev/null, a tty) is written as is: renaming over it would replace the node.
    Fd device(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!device)
      fail("write", path, errno);
    if (int err = writeAll(device.get(), parts))
      fail("write", path, err);
    return;
  }

  std::random_device random;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".tmp%08x%08x", random(), random());
    temp = path + suffix;
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    fail("create a temporary file next to it", path, errno);
  int err = writeAll(fd, parts);
  if (::close(fd) != 0 && !err)
    err = errno;
  if (!err && ::rename(temp.c_str(), path.c_str()) != 0)
    err = errno;
  if (err) {
    ::unlink(temp.c_str());
    fail("write", path, err);
  }
}

Fd::~Fd() {
  if (fd_ >= 0)
    ::close(fd_);
}

} // namespace moec
