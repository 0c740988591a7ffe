// The sha256 wrapper and the manifest format: known digests, streaming in pieces, round trips, and one
// named error per malformation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "gguf_reap/error.h"
#include "gguf_reap/manifest.h"
#include "io/base64.h"
#include "io/sha256.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

TEST(Sha256, KnownDigests) {
    EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, StreamingInAnyPiecesEqualsOneShot) {
    std::vector<uint8_t> data(1 << 20);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
    const std::string whole = sha256_hex(data.data(), data.size());
    EXPECT_EQ(whole, test::sha256_hex(data.data(), data.size()));
    Sha256 h;
    size_t off = 0, step = 1;
    while (off < data.size()) {
        const size_t n = std::min(step, data.size() - off);
        h.update(data.data() + off, n);
        off += n;
        step = step * 3 + 1;
    }
    EXPECT_EQ(h.finish_hex(), whole);
    // finish() resets: the same object hashes the next stream from scratch.
    h.update("abc", 3);
    EXPECT_EQ(h.finish_hex(), sha256_hex("abc", 3));
}

TEST(Sha256, HexForm) {
    EXPECT_TRUE(is_sha256_hex(std::string(64, 'a')));
    EXPECT_FALSE(is_sha256_hex(std::string(64, 'A')));
    EXPECT_FALSE(is_sha256_hex(std::string(63, 'a')));
    EXPECT_FALSE(is_sha256_hex(std::string(63, 'a') + "g"));
    const uint8_t b[] = {0x00, 0x0f, 0xa5, 0xff};
    EXPECT_EQ(to_hex(b), "000fa5ff");
}

// The digest whose hex is 64 times `c`.
Sha256::Digest digest(char c) {
    return *sha256_from_hex(std::string(64, c));
}

Manifest sample() {
    Manifest m;
    m.tool = "gguf-reap 0.1.0";
    m.shards.push_back({"out-00001-of-00002.gguf",
                        1000,
                        std::string(64, '1'),
                        {{"a", 96, 10, digest('2'), 0, {}},
                         {"b", 128, 0, digest('3'), 0, {}},
                         {"c", 160, 8, digest('5'), 4, {digest('6'), digest('7')}}},
                        {'G', 'G', 'U', 'F', 3}});
    m.shards.push_back({"out-00002-of-00002.gguf", 500, std::string(64, '4'), {}, {}});
    return m;
}

TEST(Base64, RoundTripsAndRefusesWhatIsNotCanonical) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{100},
                     (size_t{3} << 20) + 1}) {
        std::vector<uint8_t> b(n);
        for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + n);
        const std::string t = base64_encode(b);
        EXPECT_EQ(t.size(), (n + 2) / 3 * 4);
        EXPECT_EQ(base64_decode(t), b) << n;
    }
    EXPECT_EQ(base64_encode(std::vector<uint8_t>{'G', 'G', 'U', 'F'}), "R0dVRg==");
    EXPECT_FALSE(base64_decode("R0dVRg="));   // length
    EXPECT_FALSE(base64_decode("R0d=Rg=="));  // padding inside
    EXPECT_FALSE(base64_decode(" R0dVRg=="));
    EXPECT_FALSE(base64_decode("R0dV===="));
    EXPECT_FALSE(base64_decode("R0dV\xc3\xa9=="));
}

TEST(Manifest, RoundTripsThroughJson) {
    const Manifest m = sample();
    const Manifest back = Manifest::parse(m.to_json().dump(), "m.json");
    EXPECT_EQ(back.to_json(), m.to_json());
    ASSERT_NE(back.find_shard("out-00002-of-00002.gguf"), nullptr);
    EXPECT_EQ(back.find_shard("nope"), nullptr);
    EXPECT_EQ(back.shards[0].tensors[1].name, "b");
    EXPECT_EQ(back.version, 2);
    EXPECT_EQ(back.shards[0].header, (std::vector<uint8_t>{'G', 'G', 'U', 'F', 3}));
    EXPECT_EQ(m.to_json()["shards"][0]["header"], "R0dVRgM=");
    EXPECT_EQ(back.shards[0].tensors[2].slab_bytes, 4u);
    EXPECT_EQ(back.shards[0].tensors[2].slabs.at(1), digest('7'));
    EXPECT_EQ(m.to_json()["shards"][0]["tensors"][2]["slabs"][1], std::string(64, '7'));
    EXPECT_FALSE(m.to_json()["shards"][0]["tensors"][0].contains("slabs"));
    EXPECT_FALSE(m.to_json()["shards"][1].contains("header"));
    // Version 1 (before headers and slabs) is still read, for --manifest.
    nlohmann::ordered_json v1 = m.to_json();
    v1["version"] = 1;
    for (auto& sh : v1["shards"]) {
        sh.erase("header");
        for (auto& t : sh["tensors"]) t.erase("slabs"), t.erase("slab_bytes");
    }
    const Manifest old = Manifest::parse(v1.dump(), "m.json");
    EXPECT_EQ(old.version, 1);
    EXPECT_TRUE(old.shards[0].header.empty());
    EXPECT_TRUE(old.shards[0].tensors[2].slabs.empty());
}

TEST(Manifest, Sha256sumText) {
    EXPECT_EQ(sample().sha256sum_text(), std::string(64, '1') + "  out-00001-of-00002.gguf\n" +
                                             std::string(64, '4') + "  out-00002-of-00002.gguf\n");
}

TEST(Manifest, SumsPathBesideTheJson) {
    EXPECT_EQ(manifest_sums_path("dir/model.manifest.json"), "dir/model.manifest.sha256");
    EXPECT_EQ(manifest_sums_path("dir/model.manifest"), "dir/model.manifest.sha256");
    EXPECT_EQ(manifest_sums_path(".json"), ".json.sha256");
}

std::string parse_error(const std::string& text) {
    try {
        Manifest::parse(text, "m.json");
    } catch (const InputError& e) {
        return e.what();
    }
    return "(parsed)";
}

TEST(Manifest, EachMalformationIsNamed) {
    nlohmann::ordered_json good = sample().to_json();
    EXPECT_EQ(parse_error("{\"format\": "), "m.json: json at offset 11 (0xb): not valid JSON");
    EXPECT_EQ(parse_error("[]"), "m.json: json: a manifest must be a JSON object");
    auto with = [&](auto edit) {
        nlohmann::ordered_json j = good;
        edit(j);
        return parse_error(j.dump());
    };
    EXPECT_EQ(with([](auto& j) { j["format"] = "gguf-reap.keeplist"; }),
              "m.json: format: is \"gguf-reap.keeplist\", expected \"gguf-reap.manifest\"");
    EXPECT_EQ(with([](auto& j) { j["version"] = 3; }),
              "m.json: version: manifest version 3 is not supported (this gguf-reap reads versions 1 and 2)");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["header"] = "R0dVRgM"; }),
              "m.json: shards[0].header: is not base64 (RFC 4648, padded, no line breaks)");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["header"] = "R0dV\nRgM="; }),
              "m.json: shards[0].header: is not base64 (RFC 4648, padded, no line breaks)");
    EXPECT_EQ(
        with([](auto& j) { j["shards"][0]["header"] = ""; }),
        "m.json: shards[0].header: holds 0 bytes: a shard's header is at least one byte and at most its "
        "size (1000)");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][2]["slab_bytes"] = 3; }),
              "m.json: shards[0].tensors[2].slabs: 2 slabs of 3 bytes do not make the tensor's 8 bytes");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][2]["slab_bytes"] = 0; }),
              "m.json: shards[0].tensors[2].slabs: 2 slabs of 0 bytes do not make the tensor's 8 bytes");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][2].erase("slab_bytes"); }),
              "m.json: shards[0].tensors[2]: missing \"slab_bytes\"");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][2]["slabs"][1] = "x"; }),
              "m.json: shards[0].tensors[2].slabs[1]: \"x\" is not a sha256 (64 lower-case hex digits)");
    EXPECT_EQ(with([](auto& j) { j.erase("shards"); }), "m.json: json: missing \"shards\"");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["sha256"] = "abc"; }),
              "m.json: shards[0].sha256: \"abc\" is not a sha256 (64 lower-case hex digits)");
    EXPECT_EQ(with([](auto& j) { j["shards"][1]["name"] = "../etc/passwd"; }),
              "m.json: shards[1].name: \"../etc/passwd\" is not a plain file name");
    EXPECT_EQ(with([](auto& j) { j["shards"][1]["name"] = j["shards"][0]["name"]; }),
              "m.json: shards[1].name: shard \"out-00001-of-00002.gguf\" is listed twice");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["size"] = -1; }),
              "m.json: shards[0].size: must be a non-negative integer, found -1");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][1]["name"] = "a"; }),
              "m.json: shards[0].tensors[1].name: tensor \"a\" is listed twice");
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["tensors"][0].erase("nbytes"); }),
              "m.json: shards[0].tensors[0]: missing \"nbytes\"");
    EXPECT_EQ(parse_error(std::string(100, '[') + std::string(100, ']')),
              "m.json: json: nested deeper than 16 levels");
}

// The slab arrays are read into digests as they stream by, not into the DOM: each malformation there is
// still named as it was when the whole document was a tree (the first bad element, with its value).
TEST(Manifest, SlabArraysMalformedAreNamed) {
    const nlohmann::ordered_json good = sample().to_json();
    auto with = [&](auto edit) {
        nlohmann::ordered_json j = good;
        edit(j);
        return parse_error(j.dump());
    };
    auto slabs = [](auto& j) -> nlohmann::ordered_json& { return j["shards"][0]["tensors"][2]["slabs"]; };
    const std::string at = "m.json: shards[0].tensors[2].slabs";
    EXPECT_EQ(with([&](auto& j) { slabs(j) = nlohmann::ordered_json::array(); }),
              at + ": must be a non-empty array");
    EXPECT_EQ(with([&](auto& j) { slabs(j) = "x"; }), at + ": must be a non-empty array");
    EXPECT_EQ(with([&](auto& j) { slabs(j) = {{"a", 1}}; }), at + ": must be a non-empty array");
    EXPECT_EQ(with([&](auto& j) { slabs(j)[0] = 7; }), at + "[0]: must be a string, found 7");
    EXPECT_EQ(with([&](auto& j) { slabs(j)[1] = nullptr; }), at + "[1]: must be a string, found null");
    EXPECT_EQ(with([&](auto& j) {
                  slabs(j)[1] = {{"k", {1, 2, {{"z", "y"}}}}};
              }),
              at + "[1]: must be a string, found {\"k\":[1,2,{\"z\":\"y\"}]}");
    // The first bad element is named, whatever follows it.
    EXPECT_EQ(with([&](auto& j) {
                  slabs(j)[0] = {1, {2}};
                  slabs(j)[1] = "x";
              }),
              at + "[0]: must be a string, found [1,[2]]");
    EXPECT_EQ(with([&](auto& j) {
                  slabs(j)[0] = "x";
                  slabs(j)[1] = 5;
              }),
              at + "[0]: \"x\" is not a sha256 (64 lower-case hex digits)");
    // The count is checked before the elements, as before.
    EXPECT_EQ(with([&](auto& j) { slabs(j).push_back(3); }),
              at + ": 3 slabs of 4 bytes do not make the tensor's 8 bytes");
    // A "slabs" elsewhere is an ordinary value; a repeated key keeps the last one.
    EXPECT_EQ(with([](auto& j) { j["shards"][0]["slabs"] = {1, 2}; }), "(parsed)");
    std::string twice = good.dump();
    twice.replace(twice.find("\"slab_bytes\""), 0, "\"slabs\":[\"x\"],");
    EXPECT_EQ(parse_error(twice), "(parsed)");
    // Nesting and syntax inside a slab array count as anywhere else.
    std::string deep = good.dump();
    const std::string seventeen = std::string(12, '[') + std::string(12, ']') + ",";
    deep.replace(deep.find("\"slabs\":[") + 9, 0, seventeen);
    EXPECT_EQ(parse_error(deep), "m.json: json: nested deeper than 16 levels");
    std::string cut = good.dump();
    cut.resize(cut.find("\"slabs\":[") + 20);
    EXPECT_EQ(parse_error(cut),
              fmt::format("m.json: json at offset {} (0x{:x}): not valid JSON", cut.size(), cut.size()));
    // A version 1 manifest's slabs are not read at all.
    EXPECT_EQ(with([&](auto& j) {
                  j["version"] = 1;
                  slabs(j)[0] = 7;
              }),
              "(parsed)");
}

// load() streams the file through the same reader: what parse() gives for the text, value and error.
TEST(Manifest, LoadStreamsTheSameReader) {
    test::TempDir d;
    const std::string text = sample().to_json().dump(1);
    test::write_file(d.file("m.json"), std::vector<uint8_t>(text.begin(), text.end()));
    EXPECT_EQ(Manifest::load(d.file("m.json")).to_json(), sample().to_json());
    const std::string cut = text.substr(0, text.size() - 3);
    test::write_file(d.file("cut.json"), std::vector<uint8_t>(cut.begin(), cut.end()));
    std::string got = "(parsed)";
    try {
        Manifest::load(d.file("cut.json"));
    } catch (const InputError& e) {
        got = e.what();
    }
    EXPECT_EQ(got, d.file("cut.json") + parse_error(cut).substr(6));
    test::write_file(d.file("empty.json"), {});
    EXPECT_THROW(Manifest::load(d.file("empty.json")), InputError);
}

TEST(Manifest, SavedAtomicallyAndLoadedBack) {
    test::TempDir d;
    const std::string p = d.file("x.json");
    save_manifest(sample(), p);
    EXPECT_EQ(Manifest::load(p).to_json(), sample().to_json());
    std::ifstream in(d.file("x.sha256"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, sample().sha256sum_text());
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(d.path())) ++files;
    EXPECT_EQ(files, 2u) << "no temporaries left behind";
}

TEST(Manifest, DestinationChecks) {
    test::TempDir d;
    const std::string input = d.file("model.gguf");
    test::write_file(input, {1, 2, 3});
    EXPECT_NO_THROW(check_manifest_destination(d.file("m.json"), {input}, false));
    test::write_file(d.file("m.json"), {'{', '}'});
    EXPECT_THROW(check_manifest_destination(d.file("m.json"), {input}, false), UsageError);
    EXPECT_NO_THROW(check_manifest_destination(d.file("m.json"), {input}, true));
    try {
        check_manifest_destination(input, {input}, true);
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), input + ": the manifest would overwrite an input (" + input + ")");
    }
    // The .sha256 text file beside it counts too.
    std::filesystem::create_symlink(input, d.file("n.sha256"));
    EXPECT_THROW(check_manifest_destination(d.file("n.json"), {input}, true), UsageError);
}

}  // namespace
}  // namespace gguf_reap
