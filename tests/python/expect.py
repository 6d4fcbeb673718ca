"""What the in-worker check scripts share: asserting that a call fails as documented."""


def expect_error(error_types, call, fragments, accepted):
    """Runs call() and asserts that it raises one of `error_types` whose message holds every
    string of `fragments`; `accepted` says what went wrong if it raised nothing."""
    try:
        call()
    except error_types as e:
        for fragment in fragments:
            assert fragment in str(e), f"{fragment!r} is not in the error: {e}"
        return e
    raise AssertionError(accepted)
