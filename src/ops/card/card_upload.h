// card --upload-dir DIR: the folder `hf upload` publishes (docs/card.md, "The upload folder"): README.md
// and every file the card names, nothing else.
#pragma once

#include <string>
#include <vector>

#include "gguf_reap/card.h"

namespace gguf_reap {

// A file the card names, and where it is now.
struct UploadSource {
    std::string name;  // its name in DIR (the name the card gives it)
    std::string from;  // the file on this machine
};

// Before any input is read: DIR, when it exists, must be a directory. UsageError otherwise.
void check_upload_dir(const std::string& dir);

// Puts `files` and README.md (`readme`) into `dir`, each under a temporary name renamed into place: a
// hard link where the filesystem allows, else a copy. Refused before anything is written (UsageError)
// when DIR holds a file the card does not name, a file of a previous upload without `force`, or an
// input; on an I/O error (IoError) the files this run put there, and DIR when this run made it, are
// removed again.
std::vector<CardUploadFile> write_upload_dir(const std::string& dir, const std::vector<UploadSource>& files,
                                             const std::string& readme, bool force);

}  // namespace gguf_reap
