// eval's and calibrate's texts read and hashed (services/text_reader.h).
#include "services/text_reader.h"

#include "io/sequential_reader.h"
#include "io/sha256.h"

namespace gguf_reap {

LoadedText load_text(const TextInput& t) {
    LoadedText l;
    l.bytes = read_small_file(t.path, kTextLimit, "text");
    l.facts.name = t.name;
    l.facts.path = t.path;
    l.facts.bytes = l.bytes.size();
    l.facts.sha256 = sha256_hex(l.bytes.data(), l.bytes.size());
    return l;
}

}  // namespace gguf_reap
