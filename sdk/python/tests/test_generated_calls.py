"""conflux/_calls.py is what gen_calls.py makes of the API's table today: a row added to or
changed in dataplane/src/api/cx_api_calls.h without regenerating fails here."""
import gen_calls


def test_calls_are_generated_from_the_table():
    want = gen_calls.generate(gen_calls.TABLE.read_text())
    assert gen_calls.OUT.read_text() == want, "stale: run python3 sdk/python/gen_calls.py"


def test_every_row_is_declared():
    from conflux import lib
    rows = gen_calls.rows(gen_calls.TABLE.read_text())
    assert len(rows) >= 40
    for row in rows:
        assert callable(getattr(lib, row[2])), row[2]
