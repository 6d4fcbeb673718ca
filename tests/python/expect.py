"""What the in-worker check scripts share: asserting that a call fails as documented, and their main."""
import sys


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


def run_check(checks, bps, leave_open=()):
    """The main of a check script: joins the job, runs the check named by the first argument, says
    'CHECK ok', and shuts down (unless the check is one of `leave_open`, which ends the job itself)."""
    check = checks[sys.argv[1]]
    bps.init()
    check()
    print(f"{check.__name__} ok", flush=True)
    if check not in leave_open:
        bps.shutdown()
