// card --eval: the "Measured against the source" section, from `gguf-reap eval -o` (docs/eval.md).
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "format/json_input.h"
#include "gguf_reap/card.h"
#include "gguf_reap/error.h"
#include "io/paths.h"
#include "io/sequential_reader.h"
#include "io/sha256.h"
#include "io/units.h"
#include "model/shard_set.h"
#include "model/vocab_text.h"
#include "ops/card/card_steps.h"

namespace gguf_reap {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// An eval of a few builds on a few texts is a few kilobytes; the limits stop a hostile file.
constexpr uint64_t kEvalFileLimit = uint64_t{64} << 20;
constexpr size_t kEvalMaxValues = size_t{1} << 22;

// The value at `key` of `j`, of JSON type `t`; InputError naming the field otherwise.
const json& field(const json& j, const std::string& key, json::value_t t, const std::string& path,
                  const std::string& where) {
    const std::string name = where.empty() ? key : fmt::format("{}.{}", where, key);
    if (!j.is_object() || !j.contains(key))
        throw InputError(path, std::nullopt, name,
                         Message{"missing (is this `gguf-reap eval ", RequestField::kOut, "` output?)"});
    const json& v = j[key];
    const bool ok = t == json::value_t::number_float
                        ? v.is_number()
                        : v.type() == t || (t == json::value_t::number_integer && v.is_number_unsigned());
    if (!ok)
        throw InputError(path, std::nullopt, name,
                         fmt::format("is {}, not {}", v.type_name(), json(t).type_name()));
    return v;
}

std::optional<std::string> token_text(const json& side, const std::string& path) {
    if (side.is_null()) return std::nullopt;
    return field(side, "text", json::value_t::string, path, "outputs[].smoke.first_diff").get<std::string>();
}

// The smoke test of the build the card is for (outputs[] entry `o`), when the eval ran one.
std::optional<CardSmoke> read_smoke(const json& doc, const json& o, const std::string& path) {
    using vt = json::value_t;
    if (!doc.contains("smoke")) return std::nullopt;
    const json& s = field(doc, "smoke", vt::object, path, "");
    const json& mine = field(o, "smoke", vt::object, path, "outputs[]");
    CardSmoke c;
    c.prompt = field(s, "prompt", vt::string, path, "smoke").get<std::string>();
    c.generated = static_cast<int64_t>(
        field(field(s, "source", vt::object, path, "smoke"), "tokens", vt::array, path, "smoke.source")
            .size());
    c.identical = field(mine, "identical", vt::number_integer, path, "outputs[].smoke").get<int64_t>();
    if (!mine.contains("first_diff") || mine["first_diff"].is_null()) return c;
    const json& d = field(mine, "first_diff", vt::object, path, "outputs[].smoke");
    c.first_diff = field(d, "index", vt::number_integer, path, "outputs[].smoke.first_diff").get<int64_t>();
    c.source_token = token_text(d.value("source", json()), path);
    c.build_token = token_text(d.value("output", json()), path);
    return c;
}

CardRate read_rate(const json& b, const char* count, const char* rate, const char* ci,
                   const std::string& path) {
    using vt = json::value_t;
    CardRate r;
    r.k = field(b, count, vt::number_integer, path, "behaviour[]").get<int64_t>();
    r.n = field(b, "prompts", vt::number_integer, path, "behaviour[]").get<int64_t>();
    r.rate = field(b, rate, vt::number_float, path, "behaviour[]").get<double>();
    const json& c = field(b, ci, vt::array, path, "behaviour[]");
    if (c.size() != 2 || !c[0].is_number() || !c[1].is_number())
        throw InputError(path, std::nullopt, fmt::format("behaviour[].{}", ci), "is not [low, high]");
    r.lo = c[0].get<double>();
    r.hi = c[1].get<double>();
    return r;
}

// eval --prompts: per panel, this build's entry of behaviour[] beside the source's.
std::vector<CardBehaviour> read_behaviour(const json& doc, const std::string& as_given,
                                          const std::string& path) {
    using vt = json::value_t;
    std::vector<CardBehaviour> v;
    if (!doc.contains("behaviour")) return v;
    const json& all = field(doc, "behaviour", vt::array, path, "");
    for (const json& b : all) {
        if (field(b, "model", vt::string, path, "behaviour[]").get<std::string>() != as_given) continue;
        CardBehaviour c;
        c.panel = field(b, "panel", vt::string, path, "behaviour[]").get<std::string>();
        c.gen_tokens = field(b, "gen_tokens", vt::number_integer, path, "behaviour[]").get<int64_t>();
        c.build_loops = read_rate(b, "loops", "loop_rate", "loop_rate_ci", path);
        c.build_ends = read_rate(b, "natural_ends", "natural_end_rate", "natural_end_rate_ci", path);
        const json* src = nullptr;
        for (const json& s : all)
            if (s.is_object() && s.value("model", "") == "source" && s.value("panel", "") == c.panel)
                src = &s;
        if (!src)
            throw InputError(path, std::nullopt, "behaviour[]",
                             fmt::format("panel {} has no entry for the source", c.panel));
        c.source_loops = read_rate(*src, "loops", "loop_rate", "loop_rate_ci", path);
        c.source_ends = read_rate(*src, "natural_ends", "natural_end_rate", "natural_end_rate_ci", path);
        v.push_back(c);
    }
    return v;
}

// The KLD runs of `model` (as given) in `runs`, one per text; the first one's command into `command`
// when it is still empty.
std::vector<CardEvalText> read_runs(const json& runs, const std::string& model, const std::string& path,
                                    const std::string& where, std::vector<std::string>& command) {
    using vt = json::value_t;
    std::vector<CardEvalText> v;
    for (const json& r : runs) {
        if (field(r, "output", vt::string, path, where).get<std::string>() != model) continue;
        CardEvalText t;
        t.name = field(r, "text", vt::string, path, where).get<std::string>();
        t.tokens = field(r, "tokens", vt::number_integer, path, where).get<int64_t>();
        const json& kld = field(r, "kld", vt::object, path, where);
        const json& ppl = field(r, "ppl", vt::object, path, where);
        t.kld_mean = opt_number(kld, "mean").value_or(NAN);
        t.kld_p99 = opt_number(kld, "p99");
        t.same_top = opt_number(field(r, "same_top", vt::object, path, where), "mean").value_or(NAN);
        t.ppl_source = opt_number(ppl, "source");
        t.ppl_output = opt_number(ppl, "output").value_or(NAN);
        t.from = r.value("from", "");
        if (command.empty() && r.contains("command") && r["command"].is_array())
            for (const json& a : r["command"]) command.push_back(a.is_string() ? a.get<std::string>() : "");
        v.push_back(t);
    }
    return v;
}

// eval --reference: the reference's name and types, and the source's and this build's runs against it.
std::optional<CardEvalReference> read_reference(const json& doc, const std::string& as_given,
                                                const std::string& path) {
    using vt = json::value_t;
    if (!doc.contains("reference")) return std::nullopt;
    const json& ref = field(doc, "reference", vt::object, path, "");
    const json& src = field(doc, "source", vt::object, path, "");
    const json& shards = field(ref, "shards", vt::array, path, "reference");
    CardEvalReference c;
    c.name = !shards.empty() && shards[0].is_string() ? shards[0].get<std::string>() : "";
    c.main_type = field(ref, "main_type", vt::string, path, "reference").get<std::string>();
    c.source_type = field(src, "main_type", vt::string, path, "source").get<std::string>();
    const json& runs = field(doc, "reference_runs", vt::array, path, "");
    std::vector<std::string> unused;
    c.source = read_runs(runs, field(src, "path", vt::string, path, "source").get<std::string>(), path,
                         "reference_runs[]", unused);
    c.build = read_runs(runs, as_given, path, "reference_runs[]", unused);
    if (c.source.empty() || c.build.empty())
        throw InputError(path, std::nullopt, "reference_runs",
                         fmt::format("has no run of {} against the reference",
                                     c.source.empty() ? std::string("the source") : as_given));
    return c;
}

std::string fixed(double v, int digits) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : std::string("–");
}

}  // namespace

CardEval read_card_eval(const std::string& path, const ShardSet& output, const std::string& source_identity) {
    const std::string text = read_small_file(path, kEvalFileLimit, "gguf-reap eval report");
    const json doc = parse_json_input<json>(text, path, 16, kEvalMaxValues, "an eval report");
    using vt = json::value_t;
    if (!doc.is_object() || doc.value("kind", "") != "gguf-reap eval")
        throw InputError(path, std::nullopt, "kind",
                         Message{"not a `gguf-reap eval ", RequestField::kOut, "` report"});
    const json& src = field(doc, "source", vt::object, path, "");
    const std::string id = field(src, "identity", vt::string, path, "source").get<std::string>();
    if (id != source_identity)
        throw InputError(
            path, std::nullopt, "source.identity",
            fmt::format("{} (source {}), but the card's source has identity {}: this eval measured "
                        "builds of another source",
                        id, src.value("path", "?"), source_identity));

    // The build: the eval's output whose shard names and total size are this build's.
    std::vector<std::string> names;
    for (const Shard& s : output.shards()) names.push_back(base_name(s.path));
    std::string as_given, listed;
    const json* mine = nullptr;
    for (const json& o : field(doc, "outputs", vt::array, path, "")) {
        const json& shards = field(o, "shards", vt::array, path, "outputs[]");
        const std::string p = field(o, "path", vt::string, path, "outputs[]").get<std::string>();
        listed += fmt::format("{}{}", listed.empty() ? "" : ", ", p);
        std::vector<std::string> got;
        for (const json& n : shards) got.push_back(n.is_string() ? n.get<std::string>() : "");
        if (got == names &&
            field(o, "bytes", vt::number_unsigned, path, "outputs[]").get<uint64_t>() == output.total_bytes())
            as_given = p, mine = &o;
    }
    if (as_given.empty())
        throw InputError(
            path, std::nullopt, "outputs",
            fmt::format("measured {}, not this build ({}, {} bytes): run `gguf-reap eval` on it",
                        listed.empty() ? "no build" : listed, names.front(), output.total_bytes()));

    CardEval e;
    e.file = base_name(path);
    e.sha256 = sha256_hex(text.data(), text.size());
    e.smoke = read_smoke(doc, *mine, path);
    e.behaviour = read_behaviour(doc, as_given, path);
    e.llama_build =
        field(field(doc, "llama_cpp", vt::object, path, ""), "build", vt::string, path, "llama_cpp")
            .get<std::string>();
    e.texts = read_runs(doc.contains("runs") ? field(doc, "runs", vt::array, path, "") : json::array(),
                        as_given, path, "runs[]", e.command);
    e.reference = read_reference(doc, as_given, path);
    if (doc.contains("files") && doc["files"].is_object() && doc["files"].value("svg", json()).is_string()) {
        const std::string svg = doc["files"]["svg"].get<std::string>();
        const fs::path beside = fs::path(path).parent_path() / svg;
        std::error_code ec;
        if (fs::is_regular_file(beside, ec)) {
            // The plot must be this eval's: another eval (or anything else) may have written a file of
            // that name since. Evals from before files.svg_sha256 are taken as they are.
            const json& want = doc["files"].value("svg_sha256", json());
            if (want.is_string() && sha256_file(beside.string()) != want.get<std::string>())
                throw InputError(
                    beside.string(), std::nullopt, "files.svg_sha256",
                    fmt::format("the plot's sha256 is not the {} that {} records: it is not this "
                                "eval's plot (written over by another eval?)",
                                want.get<std::string>(), base_name(path)));
            e.svg = svg;
            e.svg_bytes = fs::file_size(beside, ec);
        }
    }
    return e;
}

namespace {

// A Markdown code span of `text`, whatever backticks it holds.
std::string code_span(const std::string& text) {
    return text.find('`') == std::string::npos ? fmt::format("`{}`", text) : fmt::format("`` {} ``", text);
}

// "Smoke test: ... the first N greedy tokens are identical to the source's", or where they part.
void smoke_line(std::string& s, const CardSmoke& m) {
    s += fmt::format(
        "Smoke test: greedy decoding (`llama-completion --temp 0`) of {} tokens after the prompt {}: ",
        m.generated, code_span(quoted_text(m.prompt)));
    if (!m.first_diff) {
        s += fmt::format("all {} tokens are identical to the source's.\n\n", m.identical);
        return;
    }
    const auto tok = [](const std::optional<std::string>& t) {
        return t ? code_span(quoted_text(*t)) : std::string("the end of generation");
    };
    s += fmt::format(
        "the first {} tokens are identical to the source's; token {} is {} where the source has {}.\n\n",
        m.identical, *m.first_diff, tok(m.build_token), tok(m.source_token));
}

std::string rate_text(const CardRate& r) {
    return fmt::format("{} of {} ({:.1f} %, 95 % interval {:.1f}–{:.1f} %)", r.k, r.n, 100 * r.rate,
                       100 * r.lo, 100 * r.hi);
}

// Per panel: loops and natural ends of this build against the source's, with n.
void behaviour_lines(std::string& s, const std::vector<CardBehaviour>& v, const std::string& prompts) {
    for (const CardBehaviour& b : v)
        s += fmt::format(
            "Generation on the prompt panel `{}` (greedy, up to {} tokens per prompt, llama-server; "
            "`gguf-reap eval {}`): this build falls into a repetition loop in {} against the source's {}, "
            "and ends naturally in {} against the source's {}.\n\n",
            b.panel, b.gen_tokens, prompts, rate_text(b.build_loops), rate_text(b.source_loops),
            rate_text(b.build_ends), rate_text(b.source_ends));
}

}  // namespace

namespace {
void kld_table(std::string& s, const CardEval& e);
void reference_table(std::string& s, const CardEvalReference& r, const std::string& reference);
}  // namespace

void measured_section(std::string& s, const CardFacts& f) {
    if (!f.eval) return;
    const CardEval& e = *f.eval;
    s += "## Measured against the source\n\n";
    if (!e.texts.empty()) kld_table(s, e);
    if (e.reference) reference_table(s, *e.reference, card_option(f, RequestField::kReference));
    if (e.smoke) smoke_line(s, *e.smoke);
    behaviour_lines(s, e.behaviour, card_option(f, RequestField::kPrompts));
    std::string build;
    for (char c : e.llama_build) build += c == '\n' ? std::string("; ") : std::string(1, c);
    std::string cmd;
    for (const std::string& a : e.command) cmd += fmt::format("{}{}", cmd.empty() ? "" : " ", base_name(a));
    s += fmt::format("llama.cpp: `{}`. ", build);
    if (!cmd.empty()) s += fmt::format("Command (first text): `{}`. ", cmd);
    s += fmt::format("From `{}`, sha256 `{}`.\n\n", e.file, e.sha256);
}

namespace {

void kld_table(std::string& s, const CardEval& e) {
    s += "KL divergence of this build's next-token distribution from the source's, over the full vocabulary, "
         "and how often both rank the same token first: `llama-perplexity --kl-divergence-base` on the "
         "source, "
         "then `--kl-divergence` on this build, on held-out text of each kind (`gguf-reap eval`). The "
         "headline's words for a mean KLD (nats): up to 0.05 nearly identical to the source, up to 0.2 "
         "close, up to 0.5 noticeably different, above that often predicts something else.\n\n";
    s += "| text | tokens | PPL source → build | mean KLD | 99 % KLD | same top token |\n";
    s += "| --- | ---: | --- | ---: | ---: | ---: |\n";
    for (const CardEvalText& t : e.texts)
        s += fmt::format(
            "| {} | {} | {} → {} | {} | {} | {} % |\n", t.name, with_commas(static_cast<uint64_t>(t.tokens)),
            t.ppl_source ? fixed(*t.ppl_source, 3) : std::string("–"), fixed(t.ppl_output, 3),
            fixed(t.kld_mean, 4), t.kld_p99 ? fixed(*t.kld_p99, 4) : std::string("–"), fixed(t.same_top, 2));
    s += "\n";
    for (const CardEvalText& t : e.texts)
        if (t.from == "last chunk row")
            s += fmt::format(
                "{}: llama-perplexity's summary was cut off; its figures are the last chunk row's "
                "running means (no 99 % KLD).\n\n",
                t.name);
}

// eval --reference: per text, the source (its quantisation alone) and this build (quantisation and
// pruning) against the unpruned reference, each row labelled.
void reference_table(std::string& s, const CardEvalReference& r, const std::string& reference) {
    s += fmt::format(
        "The same measures against the unpruned reference `{}` ({}) instead of the source "
        "(`gguf-reap eval {}`): the source's row is what its {} quantisation costs, this "
        "build's is what the whole build costs, quantisation and pruning together.\n\n",
        r.name, r.main_type, reference, r.source_type);
    s += fmt::format(
        "| text | against {} | tokens | PPL {} → model | mean KLD | 99 % KLD | same top token |\n",
        r.main_type, r.main_type);
    s += "| --- | --- | ---: | --- | ---: | ---: | ---: |\n";
    const auto row = [&](const CardEvalText& t, const std::string& label) {
        s += fmt::format("| {} | {} | {} | {} → {} | {} | {} | {} % |\n", t.name, label,
                         with_commas(static_cast<uint64_t>(t.tokens)),
                         t.ppl_source ? fixed(*t.ppl_source, 3) : std::string("–"), fixed(t.ppl_output, 3),
                         fixed(t.kld_mean, 4), t.kld_p99 ? fixed(*t.kld_p99, 4) : std::string("–"),
                         fixed(t.same_top, 2));
    };
    for (const CardEvalText& b : r.build) {
        for (const CardEvalText& t : r.source)
            if (t.name == b.name) row(t, fmt::format("the source ({})", r.source_type));
        row(b, "this build");
    }
    s += "\n";
}

}  // namespace

namespace {
json text_json(const CardEvalText& t) {
    return {{"name", t.name},
            {"tokens", t.tokens},
            {"ppl_source", t.ppl_source ? json(*t.ppl_source) : json(nullptr)},
            {"ppl_output", std::isfinite(t.ppl_output) ? json(t.ppl_output) : json(nullptr)},
            {"kld_mean", std::isfinite(t.kld_mean) ? json(t.kld_mean) : json(nullptr)},
            {"kld_p99", t.kld_p99 ? json(*t.kld_p99) : json(nullptr)},
            {"same_top", std::isfinite(t.same_top) ? json(t.same_top) : json(nullptr)},
            {"from", t.from}};
}
}  // namespace

json card_eval_json(const CardEval& e) {
    json texts = json::array();
    for (const CardEvalText& t : e.texts) texts.push_back(text_json(t));
    json j = {{"file", e.file},
              {"sha256", e.sha256},
              {"llama_build", e.llama_build},
              {"command", e.command},
              {"texts", texts},

              {"svg", e.svg.empty() ? json(nullptr) : json(e.svg)}};
    json beh = json::array();
    for (const CardBehaviour& b : e.behaviour) {
        const auto rate = [](const CardRate& r) {
            return json{{"k", r.k}, {"n", r.n}, {"rate", r.rate}, {"ci", {r.lo, r.hi}}};
        };
        beh.push_back({{"panel", b.panel},
                       {"gen_tokens", b.gen_tokens},
                       {"loops", rate(b.build_loops)},
                       {"source_loops", rate(b.source_loops)},
                       {"natural_ends", rate(b.build_ends)},
                       {"source_natural_ends", rate(b.source_ends)}});
    }
    if (!e.behaviour.empty()) j["behaviour"] = beh;
    if (e.reference) {
        json ref = {{"name", e.reference->name},
                    {"main_type", e.reference->main_type},
                    {"source_type", e.reference->source_type}};
        json src = json::array(), build = json::array();
        for (const CardEvalText& t : e.reference->source) src.push_back(text_json(t));
        for (const CardEvalText& t : e.reference->build) build.push_back(text_json(t));
        ref["source"] = src;
        ref["build"] = build;
        j["reference"] = ref;
    }
    if (e.smoke) {
        const auto opt = [](const std::optional<std::string>& t) { return t ? json(*t) : json(nullptr); };
        j["smoke"] = {{"prompt", e.smoke->prompt},
                      {"generated", e.smoke->generated},
                      {"identical", e.smoke->identical},
                      {"first_diff", e.smoke->first_diff ? json(*e.smoke->first_diff) : json(nullptr)},
                      {"source_token", opt(e.smoke->source_token)},
                      {"build_token", opt(e.smoke->build_token)}};
    }
    return j;
}

}  // namespace gguf_reap
