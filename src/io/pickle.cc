// The pickle virtual machine: a stack, a mark stack and a memo, driven one
// opcode at a time. Only data is rebuilt; see pickle.h for how calls work.
#include "io/pickle.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "io/pickle_graph.h"

namespace oasr::io::pickle {

namespace {

// Opcodes by name (Python's pickletools spelling).
// clang-format off
enum Op : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
  BININT = 'J', BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P',
  BINPERSID = 'Q', REDUCE = 'R', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
  UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd',
  EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j',
  LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G', BINBYTES = 'B',
  SHORT_BINBYTES = 'C', PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84,
  TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a,
  LONG4 = 0x8b, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
  ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94,
  FRAME = 0x95, BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};
// clang-format on

constexpr int kHighestProtocol = 5;

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

class Machine {
 public:
  Machine(std::span<const uint8_t> bytes, const Hooks& hooks, const std::string& source)
      : bytes_(bytes), hooks_(hooks), source_(source), budget_(bytes.size()) {}

  ValueRef run() {
    while (true) {
      op_offset_ = pos_;
      const uint8_t op = read_u8();
      if (op == STOP) {
        OASR_CHECK(stack_.size() == 1 && marks_.empty(), kCorruptFile, where(), "STOP with ",
                   stack_.size(), " values on the stack (expected 1)");
        OASR_CHECK(pos_ == bytes_.size(), kCorruptFile, source_, ": ", bytes_.size() - pos_,
                   " bytes after the pickle's STOP at offset ", op_offset_);
        return stack_.back();
      }
      step(op);
    }
  }

 private:
  // ---- errors and raw reads ----------------------------------------------------
  std::string where() const {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer),
                  "opcode 0x%02x at offset %zu: ", static_cast<unsigned>(bytes_[op_offset_]),
                  op_offset_);
    return source_ + ": pickle " + buffer;
  }

  void need(size_t count) {
    OASR_CHECK(count <= bytes_.size() - pos_, kCorruptFile, source_,
               ": pickle truncated at offset ", pos_, " (needs ", count, " more bytes, ",
               bytes_.size() - pos_, " left)");
  }
  uint8_t read_u8() {
    need(1);
    return bytes_[pos_++];
  }
  uint64_t read_le(size_t width) {
    need(width);
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint64_t{bytes_[pos_ + i]} << (8 * i);
    pos_ += width;
    return value;
  }
  std::string read_bytes(uint64_t count) {
    OASR_CHECK(count <= bytes_.size() - pos_, kCorruptFile, where(), "a length of ", count,
               " runs past the end of the pickle (", bytes_.size() - pos_, " bytes left)");
    std::string out(reinterpret_cast<const char*>(bytes_.data() + pos_), count);
    pos_ += count;
    return out;
  }
  std::string read_line() {
    const size_t start = pos_;
    while (pos_ < bytes_.size() && bytes_[pos_] != '\n') ++pos_;
    OASR_CHECK(pos_ < bytes_.size(), kCorruptFile, where(), "text argument has no newline");
    std::string line(reinterpret_cast<const char*>(bytes_.data() + start), pos_ - start);
    ++pos_;
    return line;
  }

  // ---- stack -------------------------------------------------------------------
  void push(ValueRef value) { stack_.push_back(std::move(value)); }
  ValueRef pop() {
    OASR_CHECK(stack_.size() > (marks_.empty() ? 0 : marks_.back()), kCorruptFile, where(),
               "pops an empty stack");
    ValueRef value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  ValueRef& top() {
    OASR_CHECK(stack_.size() > (marks_.empty() ? 0 : marks_.back()), kCorruptFile, where(),
               "reads an empty stack");
    return stack_.back();
  }
  // The values pushed since the last MARK, which is removed.
  std::vector<ValueRef> pop_mark() {
    OASR_CHECK(!marks_.empty(), kCorruptFile, where(), "needs a MARK and there is none");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValueRef> items(std::make_move_iterator(stack_.begin() + mark),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }
  Value& expect(const ValueRef& value, Kind kind, const char* what) {
    OASR_CHECK(value->kind == kind, kCorruptFile, where(), "expects ", what, ", found ",
               describe(*value));
    return *value;
  }

  // ---- work bounded by the input (io/pickle_graph.h) --------------------------
  [[noreturn]] void over_budget() const {
    OASR_THROW(kCorruptFile, where(), "the pickle makes the reader copy or walk more than ",
               budget_.total(), " values for its ", bytes_.size(),
               " bytes (a shared value expanded over and over, as a decompression bomb does); "
               "a checkpoint's pickle does not");
  }
  void charge(uint64_t units) {
    if (!budget_.charge(units)) over_budget();
  }
  // Puts `item` into the container `target`, refusing a container that
  // would hold itself (Python can pickle one; data files have none, and
  // shared ownership would never free it).
  void check_acyclic(const ValueRef& target, const ValueRef& item) {
    const detail::Reach reach = detail::reaches(item, target.get(), budget_);
    if (reach == detail::Reach::kOverBudget) over_budget();
    OASR_CHECK(reach == detail::Reach::kNo, kCorruptFile, where(), "puts a ", describe(*target),
               " inside itself (a self-referencing structure); a checkpoint holds plain data");
  }
  void set_item(const ValueRef& dict, ValueRef key, ValueRef value) {
    check_acyclic(dict, key);
    check_acyclic(dict, value);
    dicts_.set(dict, std::move(key), std::move(value));
  }

  ValueRef make_tuple(std::vector<ValueRef> items) {
    ValueRef tuple = make_value(Kind::kTuple);
    tuple->items = std::move(items);
    return tuple;
  }

  // ---- memo --------------------------------------------------------------------
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto found = memo_.find(index);
    OASR_CHECK(found != memo_.end(), kCorruptFile, where(), "memo index ", index,
               " was never stored");
    push(found->second);
  }

  // ---- integers ----------------------------------------------------------------
  // Little-endian two's complement of `width` bytes (LONG1 / LONG4).
  ValueRef read_long(uint64_t width) {
    const std::string raw = read_bytes(width);
    if (width == 0) return make_int(0);
    const bool negative = (static_cast<uint8_t>(raw.back()) & 0x80) != 0;
    // Bytes above the 8th must be pure sign extension for the value to fit.
    for (size_t i = 8; i < width; ++i) {
      if (static_cast<uint8_t>(raw[i]) != (negative ? 0xFF : 0x00))
        return make_value(Kind::kBigInt);
    }
    uint64_t bits = negative ? ~uint64_t{0} : 0;
    for (size_t i = 0; i < std::min<uint64_t>(width, 8); ++i) {
      bits &= ~(uint64_t{0xFF} << (8 * i));
      bits |= uint64_t{static_cast<uint8_t>(raw[i])} << (8 * i);
    }
    const int64_t value = static_cast<int64_t>(bits);
    if (width >= 8 && (value < 0) != negative) return make_value(Kind::kBigInt);
    return make_int(value);
  }
  ValueRef parse_int_text(std::string text, bool is_long) {
    if (is_long && !text.empty() && text.back() == 'L') text.pop_back();
    if (!is_long && text == "00") {
      ValueRef value = make_value(Kind::kBool);
      return value;
    }
    if (!is_long && text == "01") {
      ValueRef value = make_value(Kind::kBool);
      value->boolean = true;
      return value;
    }
    errno = 0;
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    OASR_CHECK(!text.empty() && end == text.c_str() + text.size(), kCorruptFile, where(), "'", text,
               "' is not an integer");
    if (errno == ERANGE) return make_value(Kind::kBigInt);
    return make_int(parsed);
  }

  // ---- protocol-0 string literals ----------------------------------------------
  // STRING: a Python repr, quoted with ' or ", with backslash escapes.
  std::string parse_quoted(const std::string& line) {
    OASR_CHECK(line.size() >= 2 && (line[0] == '\'' || line[0] == '"') && line.back() == line[0],
               kCorruptFile, where(), "STRING argument is not quoted");
    std::string out;
    for (size_t i = 1; i + 1 < line.size(); ++i) {
      char c = line[i];
      if (c != '\\' || i + 2 >= line.size()) {
        out += c;
        continue;
      }
      c = line[++i];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'x': {
          OASR_CHECK(i + 2 < line.size(), kCorruptFile, where(), "bad \\x escape");
          out += static_cast<char>(std::strtol(line.substr(i + 1, 2).c_str(), nullptr, 16));
          i += 2;
          break;
        }
        default:
          out += c;  // \\ \' \"
      }
    }
    return out;
  }
  // UNICODE: raw-unicode-escape, i.e. Latin-1 bytes with \uXXXX / \UXXXXXXXX.
  std::string parse_raw_unicode(const std::string& line) {
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<uint8_t>(line[i]);
      if (c == '\\' && i + 1 < line.size() && (line[i + 1] == 'u' || line[i + 1] == 'U')) {
        const size_t digits = line[i + 1] == 'u' ? 4 : 8;
        OASR_CHECK(i + 1 + digits < line.size(), kCorruptFile, where(), "bad \\u escape");
        append_utf8(out, static_cast<uint32_t>(
                             std::strtoul(line.substr(i + 2, digits).c_str(), nullptr, 16)));
        i += 1 + digits;
      } else {
        append_utf8(out, c);
      }
    }
    return out;
  }

  // ---- calls -------------------------------------------------------------------
  ValueRef call(const ValueRef& callable, const ValueRef& args) {
    expect(args, Kind::kTuple, "an argument tuple");
    if (callable->kind != Kind::kGlobal) {
      ValueRef object = make_value(Kind::kObject);
      object->text = "(call of " + describe(*callable) + ")";
      charge(args->items.size());
      object->items = args->items;
      return object;
    }
    const std::string& name = callable->text;
    if (hooks_.call) {
      if (ValueRef result = hooks_.call(name, args)) return result;
    }
    if (ValueRef result = call_builtin(name, *args)) return result;
    ValueRef object = make_value(Kind::kObject);
    object->text = name;
    charge(args->items.size());
    object->items = args->items;
    return object;
  }

  ValueRef call_builtin(const std::string& name, const Value& args) {
    if (name == "collections.OrderedDict" || name == "builtins.dict" ||
        name == "__builtin__.dict") {
      ValueRef dict = make_value(Kind::kDict);
      if (args.items.empty()) return dict;
      const Value& source = *args.items[0];
      if (args.items.size() == 1 && source.kind == Kind::kDict) {
        charge(source.entries.size());
        dict->entries = source.entries;
        return dict;
      }
      if (args.items.size() != 1 || (source.kind != Kind::kList && source.kind != Kind::kTuple)) {
        return nullptr;
      }
      for (const ValueRef& pair : source.items) {
        if ((pair->kind != Kind::kTuple && pair->kind != Kind::kList) || pair->items.size() != 2) {
          return nullptr;
        }
        set_item(dict, pair->items[0], pair->items[1]);
      }
      return dict;
    }
    if (name == "builtins.set" || name == "__builtin__.set" || name == "builtins.frozenset" ||
        name == "__builtin__.frozenset") {
      ValueRef set = make_value(Kind::kSet);
      if (args.items.size() == 1 &&
          (args.items[0]->kind == Kind::kList || args.items[0]->kind == Kind::kTuple)) {
        charge(args.items[0]->items.size());
        set->items = args.items[0]->items;
      } else if (!args.items.empty()) {
        return nullptr;
      }
      return set;
    }
    if (name == "builtins.bytearray" || name == "__builtin__.bytearray") {
      ValueRef bytes = make_value(Kind::kBytes);
      if (args.items.size() == 1 && args.items[0]->kind == Kind::kBytes) {
        charge(args.items[0]->text.size());
        bytes->text = args.items[0]->text;
      } else if (!args.items.empty()) {
        return nullptr;
      }
      return bytes;
    }
    // Protocol 2 spells bytes as _codecs.encode(text, 'latin1').
    if (name == "_codecs.encode" && args.items.size() == 2 &&
        args.items[0]->kind == Kind::kString && args.items[1]->kind == Kind::kString) {
      const std::string& encoding = args.items[1]->text;
      const std::string& text = args.items[0]->text;
      charge(text.size());
      ValueRef bytes = make_value(Kind::kBytes);
      if (encoding == "latin1" || encoding == "latin-1" || encoding == "iso-8859-1") {
        for (size_t i = 0; i < text.size(); ++i) {
          const auto c = static_cast<uint8_t>(text[i]);
          if (c < 0x80) {
            bytes->text += static_cast<char>(c);
          } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size() && c <= 0xC3) {
            bytes->text += static_cast<char>(((c & 0x1F) << 6) | (text[++i] & 0x3F));
          } else {
            return nullptr;  // a code point above U+00FF has no Latin-1 byte
          }
        }
        return bytes;
      }
      if (encoding == "utf-8" || encoding == "utf8") {
        bytes->text = text;
        return bytes;
      }
    }
    return nullptr;
  }

  // ---- the interpreter ---------------------------------------------------------
  void step(uint8_t op) {
    switch (op) {
      case PROTO: {
        const uint8_t protocol = read_u8();
        OASR_CHECK(protocol <= kHighestProtocol, kCorruptFile, where(), "pickle protocol ",
                   int{protocol}, " is newer than the highest known (", kHighestProtocol, ")");
        return;
      }
      case FRAME:
        read_le(8);
        return;  // framing only groups bytes; nothing to do
      case MARK:
        marks_.push_back(stack_.size());
        return;
      case POP: {
        // POP right after a MARK discards the mark (CPython does the same).
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
        } else {
          pop();
        }
        return;
      }
      case POP_MARK:
        pop_mark();
        return;
      case DUP:
        push(top());
        return;

      case NONE:
        push(make_value(Kind::kNone));
        return;
      case NEWTRUE:
      case NEWFALSE: {
        ValueRef value = make_value(Kind::kBool);
        value->boolean = op == NEWTRUE;
        push(value);
        return;
      }
      case BININT:
        push(make_int(static_cast<int32_t>(read_le(4))));
        return;
      case BININT1:
        push(make_int(read_le(1)));
        return;
      case BININT2:
        push(make_int(read_le(2)));
        return;
      case LONG1:
        push(read_long(read_le(1)));
        return;
      case LONG4: {
        const auto width = static_cast<int32_t>(read_le(4));
        OASR_CHECK(width >= 0, kCorruptFile, where(), "negative LONG4 length");
        push(read_long(static_cast<uint64_t>(width)));
        return;
      }
      case INT:
        push(parse_int_text(read_line(), false));
        return;
      case LONG:
        push(parse_int_text(read_line(), true));
        return;
      case BINFLOAT: {
        need(8);
        uint64_t bits = 0;  // big-endian IEEE double
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | bytes_[pos_ + i];
        pos_ += 8;
        ValueRef value = make_value(Kind::kFloat);
        value->real = std::bit_cast<double>(bits);
        push(value);
        return;
      }
      case FLOAT: {
        const std::string text = read_line();
        char* end = nullptr;
        ValueRef value = make_value(Kind::kFloat);
        value->real = std::strtod(text.c_str(), &end);
        OASR_CHECK(!text.empty() && end == text.c_str() + text.size(), kCorruptFile, where(), "'",
                   text, "' is not a float");
        push(value);
        return;
      }

      case BINUNICODE:
        push(make_string(read_bytes(read_le(4))));
        return;
      case SHORT_BINUNICODE:
        push(make_string(read_bytes(read_le(1))));
        return;
      case BINUNICODE8:
        push(make_string(read_bytes(read_le(8))));
        return;
      case UNICODE:
        push(make_string(parse_raw_unicode(read_line())));
        return;
      case BINBYTES:
      case SHORT_BINBYTES:
      case BINBYTES8:
      case BYTEARRAY8:
      case BINSTRING:
      case SHORT_BINSTRING: {
        const size_t width = (op == SHORT_BINBYTES || op == SHORT_BINSTRING) ? 1
                             : (op == BINBYTES8 || op == BYTEARRAY8)         ? 8
                                                                             : 4;
        ValueRef value = make_value(Kind::kBytes);
        value->text = read_bytes(read_le(width));
        push(value);
        return;
      }
      case STRING: {
        ValueRef value = make_value(Kind::kBytes);
        value->text = parse_quoted(read_line());
        push(value);
        return;
      }

      case EMPTY_TUPLE:
        push(make_tuple({}));
        return;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const size_t count = op - TUPLE1 + 1;
        std::vector<ValueRef> items(count);
        for (size_t i = count; i-- > 0;) items[i] = pop();
        push(make_tuple(std::move(items)));
        return;
      }
      case TUPLE:
        push(make_tuple(pop_mark()));
        return;
      case EMPTY_LIST:
        push(make_value(Kind::kList));
        return;
      case LIST: {
        ValueRef list = make_value(Kind::kList);
        list->items = pop_mark();
        push(list);
        return;
      }
      case APPEND: {
        ValueRef item = pop();
        const ValueRef& list = top();
        expect(list, Kind::kList, "a list");
        check_acyclic(list, item);
        list->items.push_back(std::move(item));
        return;
      }
      case APPENDS: {
        std::vector<ValueRef> items = pop_mark();
        const ValueRef& list = top();
        expect(list, Kind::kList, "a list");
        for (const ValueRef& item : items) check_acyclic(list, item);
        list->items.insert(list->items.end(), items.begin(), items.end());
        return;
      }
      case EMPTY_DICT:
        push(make_value(Kind::kDict));
        return;
      case DICT: {
        std::vector<ValueRef> items = pop_mark();
        OASR_CHECK(items.size() % 2 == 0, kCorruptFile, where(), "odd number of dict items");
        ValueRef dict = make_value(Kind::kDict);
        for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
        push(dict);
        return;
      }
      case SETITEM: {
        ValueRef value = pop();
        ValueRef key = pop();
        expect(top(), Kind::kDict, "a dict");
        set_item(top(), std::move(key), std::move(value));
        return;
      }
      case SETITEMS: {
        std::vector<ValueRef> items = pop_mark();
        OASR_CHECK(items.size() % 2 == 0, kCorruptFile, where(), "odd number of dict items");
        expect(top(), Kind::kDict, "a dict");
        for (size_t i = 0; i < items.size(); i += 2) set_item(top(), items[i], items[i + 1]);
        return;
      }
      case EMPTY_SET:
        push(make_value(Kind::kSet));
        return;
      case ADDITEMS: {
        std::vector<ValueRef> items = pop_mark();
        const ValueRef& set = top();
        expect(set, Kind::kSet, "a set");
        for (const ValueRef& item : items) check_acyclic(set, item);
        set->items.insert(set->items.end(), items.begin(), items.end());
        return;
      }
      case FROZENSET: {
        ValueRef set = make_value(Kind::kSet);
        set->items = pop_mark();
        push(set);
        return;
      }

      case BINPUT:
        memo_put(read_le(1));
        return;
      case LONG_BINPUT:
        memo_put(read_le(4));
        return;
      case MEMOIZE:
        memo_put(memo_.size());
        return;
      case PUT:
        memo_put(std::strtoull(read_line().c_str(), nullptr, 10));
        return;
      case BINGET:
        memo_get(read_le(1));
        return;
      case LONG_BINGET:
        memo_get(read_le(4));
        return;
      case GET:
        memo_get(std::strtoull(read_line().c_str(), nullptr, 10));
        return;

      case GLOBAL: {
        std::string module = read_line();
        std::string name = read_line();
        ValueRef global = make_value(Kind::kGlobal);
        global->text = module + "." + name;
        push(global);
        return;
      }
      case STACK_GLOBAL: {
        ValueRef name = pop();
        ValueRef module = pop();
        expect(name, Kind::kString, "a str name");
        expect(module, Kind::kString, "a str module");
        charge(module->text.size() + name->text.size());
        ValueRef global = make_value(Kind::kGlobal);
        global->text = module->text + "." + name->text;
        push(global);
        return;
      }
      case REDUCE: {
        ValueRef args = pop();
        ValueRef callable = pop();
        push(call(callable, args));
        return;
      }
      case NEWOBJ: {
        ValueRef args = pop();
        ValueRef cls = pop();
        push(call(cls, args));
        return;
      }
      case NEWOBJ_EX: {
        ValueRef kwargs = pop();
        ValueRef args = pop();
        ValueRef cls = pop();
        expect(kwargs, Kind::kDict, "a keyword dict");
        if (kwargs->entries.empty()) {
          push(call(cls, args));
        } else {  // keyword construction: never data a hook knows
          ValueRef object = make_value(Kind::kObject);
          object->text = cls->kind == Kind::kGlobal ? cls->text : describe(*cls);
          push(object);
        }
        return;
      }
      case INST: {
        std::string module = read_line();
        std::string name = read_line();
        ValueRef cls = make_value(Kind::kGlobal);
        cls->text = module + "." + name;
        push(call(cls, make_tuple(pop_mark())));
        return;
      }
      case OBJ: {
        std::vector<ValueRef> items = pop_mark();
        OASR_CHECK(!items.empty(), kCorruptFile, where(), "OBJ without a class");
        ValueRef cls = items.front();
        items.erase(items.begin());
        push(call(cls, make_tuple(std::move(items))));
        return;
      }
      case BUILD: {
        // Instance state (an OrderedDict's _metadata, an object's __dict__)
        // is not data a checkpoint reader needs; it is dropped.
        pop();
        top();
        return;
      }
      case BINPERSID:
      case PERSID: {
        ValueRef id = op == BINPERSID ? pop() : make_string(read_line());
        OASR_CHECK(static_cast<bool>(hooks_.persistent_load), kCorruptFile, where(),
                   "persistent id ", describe(*id), " but this pickle kind has no external data");
        push(hooks_.persistent_load(id));
        return;
      }
      case EXT1:
      case EXT2:
      case EXT4:
        OASR_THROW(kCorruptFile, where(),
                   "uses the copyreg extension registry, which a data file cannot rely on");
      case NEXT_BUFFER:
      case READONLY_BUFFER:
        OASR_THROW(kCorruptFile, where(),
                   "uses out-of-band buffers (protocol 5), which need "
                   "the buffers the pickle was written with");
      default: {
        char buffer[160];
        std::snprintf(buffer, sizeof(buffer), ": unknown pickle opcode 0x%02x at offset %zu",
                      static_cast<unsigned>(op), op_offset_);
        OASR_THROW(kCorruptFile, source_, buffer);
      }
    }
  }

  std::span<const uint8_t> bytes_;
  const Hooks& hooks_;
  const std::string& source_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  std::vector<ValueRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValueRef> memo_;
  detail::WorkBudget budget_;
  detail::DictWriter dicts_;
};

}  // namespace

ValueRef unpickle(std::span<const uint8_t> bytes, const Hooks& hooks, const std::string& source) {
  OASR_CHECK(!bytes.empty(), kCorruptFile, source, ": the pickle is empty");
  return Machine(bytes, hooks, source).run();
}

}  // namespace oasr::io::pickle
