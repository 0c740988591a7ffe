// The one handle a result holds to the library's own machinery: what a command opened or planned and
// keeps alive for its own reports (a model's shards, an imatrix, a splice's plan, a --fit search's
// headers). Its members are private (src/services/opened.h): an embedding program keeps the handle or
// drops it, copies it and destroys it, and reads the result's plain fields instead.
#pragma once

namespace gguf_reap {

struct Opened;  // src/services/opened.h

}  // namespace gguf_reap
