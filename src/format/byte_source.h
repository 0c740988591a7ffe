// Where a parser's bytes come from. The GGUF and imatrix parsers read a ByteSource through a Cursor,
// so the same parser runs over a byte span in memory (SpanSource: the fuzz targets, tests) and over a
// file (FileSource: pread through a 64 KiB window). Parsing does no other I/O.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "io/input_file.h"

namespace gguf_reap {

class ByteSource {
  public:
    virtual ~ByteSource() = default;
    const std::string& name() const { return name_; }  // for messages: the file's path
    uint64_t size() const { return size_; }
    // Copies [offset, offset + n) into dst. Precondition: the range lies inside size().
    virtual void read(uint64_t offset, void* dst, size_t n) = 0;

  protected:
    ByteSource(std::string name, uint64_t size) : name_(std::move(name)), size_(size) {}

  private:
    std::string name_;
    uint64_t size_;
};

// Bytes in memory, named like the file they stand for.
class SpanSource final : public ByteSource {
  public:
    SpanSource(std::span<const uint8_t> bytes, std::string name)
        : ByteSource(std::move(name), bytes.size()), bytes_(bytes) {}
    void read(uint64_t offset, void* dst, size_t n) override {
        if (n) std::memcpy(dst, bytes_.data() + offset, n);
    }

  private:
    std::span<const uint8_t> bytes_;
};

// A file read through a 64 KiB window: a header of 100k tensors is a few thousand preads, and a parse
// reads at most 64 KiB past the header's end. While it exists the kernel reads exactly what it is asked
// for (POSIX_FADV_RANDOM): its readahead would otherwise pull hundreds of KiB of tensor data from the
// disk after every header of a cold shard set. Ordinary readahead is restored when it goes.
class FileSource final : public ByteSource {
  public:
    explicit FileSource(const InputFile& file);
    ~FileSource() override;
    FileSource(const FileSource&) = delete;
    FileSource& operator=(const FileSource&) = delete;
    void read(uint64_t offset, void* dst, size_t n) override;

  private:
    static constexpr uint64_t kWindow = 64 * 1024;
    const InputFile& file_;
    std::vector<uint8_t> buf_;
    uint64_t buf_start_ = 0;
};

}  // namespace gguf_reap
