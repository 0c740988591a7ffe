// calibrate.json: written by calibrate after each text, read back by the next calibrate (to resume) and
// by rank and card (what made each imatrix) (gguf_reap/calibrate.h, docs/calibrate.md).
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/calibrate.h"
#include "gguf_reap/error.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/upload_path.h"
#include "ops/calibrate/calibrate_internal.h"

namespace gguf_reap {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A calibrate.json holds a few dozen values per text.
constexpr uint64_t kJsonLimit = uint64_t{16} << 20;
constexpr size_t kMaxValues = 1'000'000;
constexpr int kMaxDepth = 8;

Json read_doc(const std::string& path) {
    const std::string text = read_small_file(path, kJsonLimit, "calibrate.json");
    Json j = parse_json_input<Json>(text, path, kMaxDepth, kMaxValues, "a calibrate.json");
    if (!j.is_object() || !j.contains("texts") || !j["texts"].is_array() || !j.contains("tool") ||
        !j["tool"].is_string())
        throw InputError(path, std::nullopt, "texts", "not a calibrate.json (no \"texts\" array)");
    return j;
}

template <class T>
T field(const Json& t, const char* key, const std::string& path, size_t i) {
    try {
        return t.at(key).get<T>();
    } catch (const Json::exception&) {
        throw InputError(path, std::nullopt, fmt::format("texts[{}].{}", i, key),
                         "missing or of another type");
    }
}

// calibrate.json is meant for upload beside the imatrices (issue 40): it names no path of this machine.
// Each path it records, given absolute or relative to the working directory, becomes upload_path's name
// for it (relative to calibrate.json's directory when under it, else its base name), and so does every
// word of a recorded command that is one of those paths or any absolute path.
class UploadPaths {
  public:
    explicit UploadPaths(const std::string& json_out) : dir_(document_dir(json_out)) {}
    std::string operator()(const std::string& p) {
        if (p.empty()) return p;
        const std::string abs = fs::absolute(p).lexically_normal().string();
        std::string name = upload_path(abs, dir_);
        given_.emplace(p, name);
        return name;
    }
    std::vector<std::string> words(const std::vector<std::string>& argv) const {
        std::vector<std::string> out;
        for (const std::string& w : argv) {
            const auto it = given_.find(w);
            out.push_back(it != given_.end() ? it->second : upload_path(w, dir_));
        }
        return out;
    }

  private:
    fs::path dir_;
    std::map<std::string, std::string> given_;
};

}  // namespace

nlohmann::ordered_json calibrate_json(const CalibrateResult& r, const std::string& json_out) {
    std::optional<UploadPaths> up;
    if (!json_out.empty()) up.emplace(json_out);
    const auto path = [&](const std::string& p) { return up ? (*up)(p) : p; };
    const auto words = [&](const std::vector<std::string>& w) { return up ? up->words(w) : w; };
    Json j;
    j["tool"] = r.tool;
    j["llama_cpp"] = {{"build", r.llama_build},
                      {"llama_imatrix", path(r.imatrix_path)},
                      {"llama_tokenize", path(r.tokenize_path)},
                      {"args", r.llama_args}};
    j["model"] = {{"path", path(r.model)},          {"shards", r.model_shards},
                  {"bytes", r.model_bytes},         {"identity", r.source_identity},
                  {"expert_count", r.expert_count}, {"expert_used_count", r.expert_used_count}};
    j["settings"] = {{"ctx", r.ctx},
                     {"batch", r.batch},
                     {"tokens", r.tokens_requested ? Json(*r.tokens_requested) : Json()},
                     {"threads", r.threads ? Json(r.threads) : Json()}};
    Json texts = Json::array();
    for (const CalibrateTextFacts& t : r.texts) {
        Json e;
        e["name"] = t.name;
        e["path"] = path(t.path);
        e["sha256"] = t.sha256;
        e["bytes"] = t.bytes;
        e["tokens"] = t.tokens;
        e["used"] = {{"path", path(t.used_path)},
                     {"sha256", t.used_sha256},
                     {"bytes", t.used_bytes},
                     {"tokens", t.used_tokens}};
        e["chunks"] = t.chunks;
        e["ppl"] = t.ppl ? Json{{"value", t.ppl->value}, {"err", t.ppl->err}} : Json();
        e["imatrix"] = path(t.imatrix);
        e["imatrix_sha256"] = t.imatrix_sha256;
        e["key"] = t.key;
        e["cached"] = t.cached;
        e["seconds"] = std::round(t.seconds * 1000) / 1000;
        e["command"] = words(t.command);
        e["tokenize_command"] = words(t.tokenize_command);
        texts.push_back(std::move(e));
    }
    j["texts"] = std::move(texts);
    Json sanity = Json::array();
    for (const SanityProblem& p : r.sanity)
        sanity.push_back({{"file", path(p.file)},
                          {"offset", p.offset ? Json(*p.offset) : Json()},
                          {"field", p.field},
                          {"message", p.message}});
    j["sanity"] = std::move(sanity);
    return j;
}

namespace calibrate_detail {

std::vector<CalibrateTextFacts> read_texts(const std::string& path) {
    const Json j = read_doc(path);
    std::vector<CalibrateTextFacts> out;
    for (size_t i = 0; i < j["texts"].size(); ++i) {
        const Json& t = j["texts"][i];
        CalibrateTextFacts f;
        f.name = field<std::string>(t, "name", path, i);
        f.path = field<std::string>(t, "path", path, i);
        f.sha256 = field<std::string>(t, "sha256", path, i);
        f.bytes = field<uint64_t>(t, "bytes", path, i);
        f.tokens = field<int64_t>(t, "tokens", path, i);
        const Json used = field<Json>(t, "used", path, i);
        f.used_path = field<std::string>(used, "path", path, i);
        f.used_sha256 = field<std::string>(used, "sha256", path, i);
        f.used_bytes = field<uint64_t>(used, "bytes", path, i);
        f.used_tokens = field<int64_t>(used, "tokens", path, i);
        f.chunks = field<int64_t>(t, "chunks", path, i);
        if (t.contains("ppl") && t["ppl"].is_object())
            f.ppl =
                ValueErr{field<double>(t["ppl"], "value", path, i), field<double>(t["ppl"], "err", path, i)};
        f.imatrix = field<std::string>(t, "imatrix", path, i);
        f.imatrix_sha256 = field<std::string>(t, "imatrix_sha256", path, i);
        f.key = field<std::string>(t, "key", path, i);
        f.seconds = field<double>(t, "seconds", path, i);
        f.command = field<std::vector<std::string>>(t, "command", path, i);
        f.tokenize_command = field<std::vector<std::string>>(t, "tokenize_command", path, i);
        out.push_back(std::move(f));
    }
    return out;
}

bool was_complete(const std::string& dir) {
    try {
        const Json j = read_doc(dir + "/" + std::string(kJsonName));
        return j.contains("complete") && j["complete"].is_boolean() && j["complete"].get<bool>();
    } catch (const Error&) {
        return false;
    }
}

}  // namespace calibrate_detail

std::vector<CalibrationText> read_calibration_texts(const std::string& calibrate_json) {
    std::vector<CalibrationText> out;
    for (const CalibrateTextFacts& t : calibrate_detail::read_texts(calibrate_json))
        out.push_back({t.name, t.sha256, t.used_sha256, t.imatrix_sha256});
    return out;
}

TextOrigin text_origin(const std::vector<CalibrationText>& calibration, const std::string& text_sha256) {
    TextOrigin o;
    for (const CalibrationText& c : calibration) {
        if (c.sha256.empty()) {
            o.unrecorded.push_back(c.name);
            continue;
        }
        if (!text_sha256.empty() && (text_sha256 == c.sha256 || text_sha256 == c.used_sha256)) {
            o.held_out = false;
            o.domain = c.name;
            o.unrecorded.clear();
            return o;
        }
    }
    // Held out only when every calibration text is known and the text's own sha256 is.
    if (o.unrecorded.empty() && !text_sha256.empty() && !calibration.empty()) o.held_out = true;
    return o;
}

std::optional<CalibrationRecord> find_calibration(const std::string& imatrix_path,
                                                  const std::string& json_path,
                                                  const std::string& imatrix_sha256) {
    std::string path = json_path;
    if (path.empty()) {
        const fs::path beside =
            fs::path(imatrix_path).parent_path() / std::string(calibrate_detail::kJsonName);
        std::error_code ec;
        if (!fs::is_regular_file(beside, ec)) return std::nullopt;
        path = beside.string();
    }
    const Json j = read_doc(path);
    const auto texts = calibrate_detail::read_texts(path);
    for (size_t i = 0; i < texts.size(); ++i) {
        const CalibrateTextFacts& t = texts[i];
        // The imatrix as recorded (relative to where calibrate ran), or its name beside calibrate.json.
        const fs::path recorded(t.imatrix);
        const fs::path local = fs::path(path).parent_path() / recorded.filename();
        std::error_code e1, e2;
        const bool same =
            fs::equivalent(recorded, imatrix_path, e1) || fs::equivalent(local, imatrix_path, e2);
        if (!same && (imatrix_sha256.empty() || t.imatrix_sha256 != imatrix_sha256)) continue;
        CalibrationRecord r;
        r.json_path = path;
        r.name = t.name;
        r.imatrix_sha256 = t.imatrix_sha256;
        r.text_path = t.path;
        r.text_sha256 = t.sha256;
        r.used_sha256 = t.used_sha256;
        r.tokens = t.tokens;
        r.used_tokens = t.used_tokens;
        r.chunks = t.chunks;
        r.ctx = j.contains("settings") ? opt_number<uint64_t>(j["settings"], "ctx").value_or(0) : 0;
        r.command = t.command;
        if (j.contains("llama_cpp") && j["llama_cpp"].is_object()) {
            r.llama_build = opt_string(j["llama_cpp"], "build");
            if (j["llama_cpp"].contains("args") && j["llama_cpp"]["args"].is_array())
                for (const Json& a : j["llama_cpp"]["args"])
                    if (a.is_string()) r.llama_args.push_back(a.get<std::string>());
        }
        return r;
    }
    return std::nullopt;
}

}  // namespace gguf_reap
