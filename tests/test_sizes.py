"""The product's sizes (scripts/dev/sizes.py): no file over 600 lines, no function over 80,
except the violations tests/size_allowlist.txt still lists; and the checker's own scan."""

import pathlib
import textwrap

from _scripts import ROOT, load_script

sizes = load_script("dev/sizes")
ALLOWLIST = ROOT / "tests" / "size_allowlist.txt"


def test_product_within_limits_but_for_the_allowlist():
    found = sizes.violations(ROOT)
    allowed = sizes.read_allowlist(ALLOWLIST)
    over = [str(v) for v in found if v.key not in allowed]
    assert not over, "over the size limits (split by concept):\n" + "\n".join(over)


def test_allowlist_names_only_current_violations():
    # An entry whose file or function is back within the limits goes from the list.
    keys = {v.key for v in sizes.violations(ROOT)}
    stale = sorted(sizes.read_allowlist(ALLOWLIST) - keys)
    assert not stale, f"no longer violations, remove from {ALLOWLIST.name}: {stale}"


def test_product_files_are_the_shipped_sources():
    files = sizes.product_files(ROOT)
    assert "ortops/ort/session.py" in files and "src/core/rnn/layer.cpp" in files
    assert not [f for f in files if f.startswith("src/tools/")]
    assert not [f for f in files if not f.startswith(("src/", "ortops/"))]


def test_python_functions_count_def_to_last_line():
    src = textwrap.dedent('''\
        def a():
            def inner():
                return 1
            return inner


        class C:
            @staticmethod
            def m(x):
                y = x
                return y
        ''')
    assert sizes.python_functions(src) == [("a", 1, 4), ("a.inner", 2, 2), ("C.m", 9, 3)]


CPP = textwrap.dedent('''\
    #include <vector>
    #define BODY { int x; }
    namespace ortops {
    namespace {
    const char* text = "} not a brace {";
    char open = '{';
    int f(int a)
    {
        auto g = [&](int b) {
            return b + '}';
        };
        /* } */ // }
        return g(a);
    }
    }  // namespace

    struct S : Base {
        S(int a) : x{a}, y{a}
        {
            x = 1;
        }
        int get() const { return x; }
        int x, y;
    };

    std::vector<int>
    Layer::shapes(int n) const
    {
        return {n, n};
    }
    const std::vector<int> table = {1, 2};
    }  // namespace ortops

    extern "C" {
    int exported(void) { return 0; }
    }
    ''')


def test_cpp_functions_by_brace_matching():
    assert sizes.cpp_functions(CPP) == [
        ("f", 7, 8), ("S", 18, 4), ("get", 22, 1), ("Layer::shapes", 26, 5), ("exported", 35, 1)]


def test_violations_and_exit_status(tmp_path, capsys):
    (tmp_path / "ortops").mkdir()
    (tmp_path / "src" / "tools").mkdir(parents=True)
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "ortops" / "m.py").write_text("def long():\n" + long_body)
    (tmp_path / "ortops" / "ok.py").write_text("def short():\n    return 1\n")
    (tmp_path / "src" / "big.cpp").write_text("int v;\n" * 601)
    (tmp_path / "src" / "tools" / "tool.cpp").write_text("int v;\n" * 700)   # not product
    found = sizes.violations(tmp_path)
    assert [(v.key, v.lines) for v in found] == [("ortops/m.py::long", 81), ("src/big.cpp", 601)]
    assert sizes.main(["--root", str(tmp_path)]) == 1
    allow = tmp_path / "allow.txt"
    allow.write_text("# others'\nortops/m.py::long\nsrc/big.cpp  # wt-core\n")
    assert sizes.main(["--root", str(tmp_path), "--allow", str(allow)]) == 0
    assert "src/big.cpp:1: file 601 lines (limit 600) (allowed)" in capsys.readouterr().out
