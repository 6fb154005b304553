// The data-only pickle reader (io/pickle.h) on pickles CPython wrote
// (pickle.dumps(obj, protocol=N).hex(), pasted below with the object), and
// on hand-made streams for the opcodes CPython no longer emits.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/pickle.h"

namespace oasr {
namespace {

using io::pickle::Hooks;
using io::pickle::Kind;
using io::pickle::unpickle;
using io::pickle::Value;
using io::pickle::ValueRef;

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return {text.begin(), text.end()};
}

const Value& entry(const Value& dict, const std::string& key) {
  for (const auto& [k, v] : dict.entries) {
    if (k->kind == Kind::kString && k->text == key) return *v;
  }
  throw std::runtime_error("no key " + key);
}

// {'a': [1, -2.5, 'xé中', True, None, 123456789012345678901234567890, -7],
//  'b': ('s', b'\x00\x01q\\'), 'c': {1: 2}, 'd': {3}}
constexpr const char* kProtocol0 =
    "286470300a56610a70310a286c70320a49310a61462d322e350a615678e95c75346532640a70330a614930310a"
    "614e614c3132333435363738393031323334353637383930313233343536373839304c0a61492d370a61735662"
    "0a70340a2856730a70350a635f636f646563730a656e636f64650a70360a28565c753030303001715c75303035"
    "630a70370a566c6174696e310a70380a7470390a527031300a747031310a7356630a7031320a28647031330a49"
    "310a49320a737356640a7031340a635f5f6275696c74696e5f5f0a7365740a7031350a28286c7031360a49330a"
    "61747031370a527031380a732e";
constexpr const char* kProtocol1 =
    "7d71002858010000006171015d7102284b0147c004000000000000580600000078c3a9e4b8ad71034930310a4e"
    "4c3132333435363738393031323334353637383930313233343536373839304c0a4af9ffffff65580100000062"
    "7104285801000000737105635f636f646563730a656e636f64650a71062858040000000001715c710758060000"
    "006c6174696e31710874710952710a74710b580100000063710c7d710d4b014b0273580100000064710e635f5f"
    "6275696c74696e5f5f0a7365740a710f285d71104b0361747111527112752e";

TEST(Pickle, ReadsProtocols0And1AsCPythonWroteThem) {
  for (const char* hex : {kProtocol0, kProtocol1}) {
    const ValueRef root = unpickle(from_hex(hex), {}, "test");
    ASSERT_EQ(root->kind, Kind::kDict);
    ASSERT_EQ(root->entries.size(), 4u);
    const Value& a = entry(*root, "a");
    ASSERT_EQ(a.kind, Kind::kList);
    ASSERT_EQ(a.items.size(), 7u);
    EXPECT_EQ(a.items[0]->integer, 1);
    EXPECT_EQ(a.items[1]->kind, Kind::kFloat);
    EXPECT_EQ(a.items[1]->real, -2.5);
    EXPECT_EQ(a.items[2]->text, "x\xc3\xa9\xe4\xb8\xad");  // UTF-8 of 'xé中'
    EXPECT_EQ(a.items[3]->kind, Kind::kBool);
    EXPECT_TRUE(a.items[3]->boolean);
    EXPECT_EQ(a.items[4]->kind, Kind::kNone);
    EXPECT_EQ(a.items[5]->kind, Kind::kBigInt);
    EXPECT_EQ(a.items[6]->integer, -7);
    const Value& b = entry(*root, "b");
    ASSERT_EQ(b.kind, Kind::kTuple);
    EXPECT_EQ(b.items[1]->kind, Kind::kBytes);  // _codecs.encode(..., 'latin1')
    EXPECT_EQ(b.items[1]->text, std::string("\x00\x01q\\", 4));
    const Value& c = entry(*root, "c");
    ASSERT_EQ(c.entries.size(), 1u);
    EXPECT_EQ(c.entries[0].first->integer, 1);
    EXPECT_EQ(c.entries[0].second->integer, 2);
    const Value& d = entry(*root, "d");
    ASSERT_EQ(d.kind, Kind::kSet);
    EXPECT_EQ(d.items.at(0)->integer, 3);
  }
}

// {'s': {3, 4}, 'f': frozenset([5]), 'b': b'\x00\xff', 'ba': bytearray(b'ab'),
//  'n': -(2**40), 'l': 2**63 - 1, 'neg': -2**63, 't': (1, (2,), [])}
TEST(Pickle, ReadsProtocol5AsCPythonWroteIt) {
  const ValueRef root = unpickle(
      from_hex("8005956c000000000000007d94288c0173948f94284b034b04908c016694284b0591948c01629443"
               "0200ff948c026261949602000000000000006162948c016e948a060000000000ff8c016c948a08ff"
               "ffffffffffff7f8c036e6567948a0800000000000000808c0174944b014b0285945d948794752e"),
      {}, "test");
  EXPECT_EQ(entry(*root, "s").items.size(), 2u);
  EXPECT_EQ(entry(*root, "f").kind, Kind::kSet);
  EXPECT_EQ(entry(*root, "b").text, std::string("\x00\xff", 2));
  EXPECT_EQ(entry(*root, "ba").text, "ab");
  EXPECT_EQ(entry(*root, "n").integer, -(int64_t{1} << 40));
  EXPECT_EQ(entry(*root, "l").integer, INT64_MAX);
  EXPECT_EQ(entry(*root, "neg").integer, INT64_MIN);
  const Value& t = entry(*root, "t");
  ASSERT_EQ(t.items.size(), 3u);
  EXPECT_EQ(t.items[1]->kind, Kind::kTuple);
  EXPECT_EQ(t.items[2]->kind, Kind::kList);
}

TEST(Pickle, RunsTheStackOpcodesAndOldStyleInstances) {
  // MARK 1 2 POP_MARK | 'k' DUP POP | S'..' | GET/PUT | INST | OBJ | TUPLE2.
  const std::string stream =
      "("                      // the mark of the final TUPLE
      "(I1\nI2\n1"             // pushed and dropped again
      "S'q\\'\\n\\x41'\np0\n"  // STRING with escapes, memo 0
      "0g0\n"                  // POP it, GET it back
      "2"                      // DUP
      "(I9\nimod\nKlass\n"     // INST mod.Klass(9)
      "(cmod\nOther\nI4\no"    // OBJ mod.Other(4)
      "(tt.";                  // an empty tuple, then the TUPLE of all
  Hooks hooks;
  hooks.call = [](const std::string& global, const ValueRef& args) -> ValueRef {
    if (global != "mod.Klass") return nullptr;
    return io::pickle::make_int(args->items.at(0)->integer * 10);
  };
  const ValueRef root = unpickle(bytes_of(stream), hooks, "test");
  ASSERT_EQ(root->kind, Kind::kTuple);
  ASSERT_EQ(root->items.size(), 5u);
  EXPECT_EQ(root->items[0]->text, "q'\nA");
  EXPECT_EQ(root->items[1], root->items[0]);  // DUP shares the value
  EXPECT_EQ(root->items[2]->integer, 90);     // the hook built mod.Klass(9)
  EXPECT_EQ(root->items[3]->kind, Kind::kObject);
  EXPECT_EQ(root->items[3]->text, "mod.Other");
  EXPECT_EQ(root->items[4]->kind, Kind::kTuple);  // the final EMPTY tuple from "(t"
  EXPECT_EQ(io::pickle::describe(*root->items[3]), "object built by unsupported global mod.Other");
}

TEST(Pickle, HandsPersistentIdsToTheHook) {
  Hooks hooks;
  hooks.persistent_load = [](const ValueRef& id) {
    return io::pickle::make_string("<" + id->text + ">");
  };
  EXPECT_EQ(unpickle(bytes_of("Pabc\n."), hooks, "t")->text, "<abc>");
  EXPECT_EQ(unpickle(from_hex("8002580100000078512e"), hooks, "t")->text, "<x>");  // BINPERSID
  try {
    unpickle(bytes_of("Pabc\n."), {}, "t");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no external data"), std::string::npos) << e.what();
  }
}

TEST(Pickle, RefusesWhatDataCannotRelyOn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"8006", "pickle protocol 6 is newer"},
      {"80028201", "copyreg extension registry"},
      {"800597", "out-of-band buffers"},
      {"8002", "truncated at offset 2"},
      {"80022e", "STOP with 0 values"},
      {"80024b014b022e", "STOP with 2 values"},
      {"800274", "needs a MARK"},
      {"8002284b0164", "odd number of dict items"},
      {"80024b014b0161", "expects a list, found int 1"},
      {"", "the pickle is empty"},
      {"80025a", "unknown pickle opcode 0x5a at offset 2"},
  };
  for (const auto& [hex, needle] : cases) {
    try {
      unpickle(from_hex(hex), {}, "data.pkl");
      ADD_FAILURE() << hex;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorruptFile) << hex;
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << hex << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("data.pkl: ", 0), 0u) << e.what();
    }
  }
}

// What a small hostile pickle must not make the reader do: keep a container
// that holds itself (never freed), recurse once per nesting level when the
// value is released, search a dict linearly per key, or copy a shared value
// without bound.
TEST(Pickle, BoundsTheWorkAPickleCanCause) {
  using namespace std::string_literals;
  for (const std::string& text : {"\x80\x02]q\x00h\x00"
                                  "a."s,
                                  "\x80\x02}q\x00K\x01h\x00s."s,
                                  "\x80\x02]q\x00]q\x01h\x00"
                                  "a0h\x00h\x01"
                                  "a."s}) {
    try {
      unpickle(bytes_of(text), {}, "data.pkl");
      ADD_FAILURE() << "a self-referencing container was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("inside itself"), std::string::npos) << e.what();
    }
  }

  std::string deep = "N" + std::string(1'000'000, '\x85') + ".";  // a million nested 1-tuples
  ValueRef root = unpickle(bytes_of(deep), {}, "data.pkl");
  EXPECT_EQ(root->kind, Kind::kTuple);
  root.reset();  // released without a million nested destructor calls

  std::string keys = "}(";
  constexpr int kKeys = 200'000;
  for (int i = 0; i < kKeys; ++i) {
    keys += 'J';
    for (int b = 0; b < 4; ++b) keys += static_cast<char>((i >> (8 * b)) & 0xFF);
    keys += 'N';
  }
  keys += "u.";
  EXPECT_EQ(unpickle(bytes_of(keys), {}, "data.pkl")->entries.size(), size_t{kKeys});

  // set(shared_list) ten thousand times: each call copies 100000 items.
  std::string bomb = "cbuiltins\nset\nq\x01](" + std::string(100'000, 'N') + "eq\x00"s;
  for (int i = 0; i < 10'000; ++i) bomb += "h\x01h\x00\x85R0"s;
  bomb += ".";
  try {
    unpickle(bytes_of(bomb), {}, "data.pkl");
    ADD_FAILURE() << "a copy bomb was expanded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decompression bomb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oasr
