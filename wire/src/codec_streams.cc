// Reusable per-thread cereal streams (codec_streams.h).
#include "postal/wire/codec_streams.h"

#include <streambuf>

namespace postal::wire::internal {
namespace {

// Appends everything written to a std::string.
class StringSink : public std::streambuf {
 public:
  std::string* target = nullptr;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    target->append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      target->push_back(traits_type::to_char_type(c));
    }
    return traits_type::not_eof(c);
  }
};

// Reads a byte range in place; seeks within it (tellg is what codec.h's bounds check needs).
class ViewSource : public std::streambuf {
 public:
  void reset(std::string_view bytes) {
    char* begin = const_cast<char*>(bytes.data());  // read-only: nothing here writes through it
    setg(begin, begin, begin + bytes.size());
  }

 protected:
  pos_type seekoff(off_type off, std::ios_base::seekdir dir,
                   std::ios_base::openmode which) override {
    if (!(which & std::ios_base::in)) return pos_type(off_type(-1));
    off_type base = 0;
    if (dir == std::ios_base::cur) base = gptr() - eback();
    if (dir == std::ios_base::end) base = egptr() - eback();
    return seekpos(pos_type(base + off), which);
  }
  pos_type seekpos(pos_type pos, std::ios_base::openmode which) override {
    const off_type at = off_type(pos);
    if (!(which & std::ios_base::in) || at < 0 || at > egptr() - eback()) {
      return pos_type(off_type(-1));
    }
    setg(eback(), eback() + at, egptr());
    return pos;
  }
};

}  // namespace

struct OutputSlot {
  StringSink sink;
  std::ostream stream{&sink};
  bool busy = false;
};

struct InputSlot {
  ViewSource source;
  std::istream stream{&source};
  bool busy = false;
};

namespace {
thread_local OutputSlot output_slot;
thread_local InputSlot input_slot;
}  // namespace

OutputLease::OutputLease(std::string& target) : slot_(&output_slot) {
  if (slot_->busy) {
    own_ = std::make_unique<OutputSlot>();
    slot_ = own_.get();
  }
  slot_->busy = true;
  slot_->sink.target = &target;
  slot_->stream.clear();
}

OutputLease::~OutputLease() {
  slot_->sink.target = nullptr;
  slot_->busy = false;
}

std::ostream& OutputLease::stream() { return slot_->stream; }

InputLease::InputLease(std::string_view bytes) : slot_(&input_slot) {
  if (slot_->busy) {
    own_ = std::make_unique<InputSlot>();
    slot_ = own_.get();
  }
  slot_->busy = true;
  slot_->source.reset(bytes);
  slot_->stream.clear();
}

InputLease::~InputLease() {
  slot_->source.reset(std::string_view());
  slot_->busy = false;
}

std::istream& InputLease::stream() { return slot_->stream; }

}  // namespace postal::wire::internal
