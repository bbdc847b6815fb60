"""CTest analysis_browser (label browser): report.html and trend.html open in headless Chromium
with no console error, no exception and no network request, and their plots render.

    browser_check.py --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR

The report is built with rb-analysis report --html from a real run of the program on the host
path (tests/analysis/analysis_small.yaml, 2 ranks); the trend page with rb-analysis trend from
a small synthetic baseline store (synthetic_store.py). Each page is driven over the DevTools
protocol (--remote-debugging-pipe: no port, nothing else can connect), which tells console
errors from other messages and sees every request. A page passes when no console error,
uncaught exception or error log entry came, it fetched nothing over http(s), every plotly
figure div holds a non-empty .main-svg, and hovering one point (HOVERS) shows a label with its
value, variance and name. Screenshots (report.png, trend.png) stay in the workdir.
Chromium (Debian's `chromium`) is installed with apt-get when missing and this is root; else,
or when that fails, the test is skipped (exit 77) saying why.
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
WIDTH, MAX_HEIGHT = 1400, 16000
# After the page's scripts ran: each figure div and whether plotly drew into it.
PLOTS_JS = ("JSON.stringify(Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => "
            "({id: d.id, svgs: d.querySelectorAll('.main-svg').length, "
            "marks: d.querySelectorAll('.main-svg path, .main-svg rect, .main-svg image').length})))")
# Per page: a figure, trace and point to hover (as a mouse would, through plotly's own hover), and
# what its label must say: the value, its variance and which point it is.
HOVERS = {"report": ("plot-throughput", 0, 0, ["S=", "throughput", "CV between iterations", "spread"]),
          "trend": ("plot-k0-0", 2, 1, ["commit", "CV in the night", "verdict"])}


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def apt_install(packages):
    """apt-get install PACKAGES as root (update first where the first try fails); False when
    not root, no apt-get, or the install failed."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + packages
    for first in ([], [["apt-get", "update", "-q"]]):
        for c in first + [cmd]:
            r = subprocess.run(c, env=env, capture_output=True, text=True)
        if r.returncode == 0:
            return True
    print(r.stdout[-2000:] + r.stderr[-2000:])
    return False


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    print("chromium not found: installing Debian's chromium")
    if not apt_install(["chromium"]):
        skip("no chromium, and it could not be installed (apt-get install chromium, as root)")
    return shutil.which("chromium") or skip("apt-get installed chromium but no chromium command appeared")


def python_packages():
    try:
        # imported to see that they load; the report imports them itself
        import jinja2  # noqa: F401  # pylint: disable=unused-import
        import plotly  # noqa: F401  # pylint: disable=unused-import
    except ImportError:
        if not apt_install(["python3-plotly", "python3-jinja2"]):
            skip("no python3-plotly / python3-jinja2, and they could not be installed")


class Chrome:
    """A headless Chromium spoken to over --remote-debugging-pipe (fd 3: commands to it, fd 4:
    its replies and events, each JSON message ended by a NUL byte)."""

    def __init__(self, exe, profile):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():  # in the child, before exec: the pipe ends where Chromium looks for them
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_r, from_w)]  # off 3 and 4 first
            os.dup2(high[0], 3)  # dup2 leaves the copies open across exec
            os.dup2(high[1], 4)
        flags = ["--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                 "--no-default-browser-check", f"--user-data-dir={profile}", f"--window-size={WIDTH},900"]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        self.proc = subprocess.Popen([exe] + flags, preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def _read(self, timeout):
        end = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe (did it start?)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read(timeout)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout):
        end = time.monotonic() + timeout
        while not any(e.get("method") == name for e in self.events):
            self.events.append(self._read(max(0.1, end - time.monotonic())))

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def problems_of(events):
    """Console errors, exceptions, error log entries and http(s) requests among the events."""
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            out.append(f"log error: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Network.requestWillBeSent" and p["request"]["url"].startswith(("http:", "https:")):
            out.append(f"network request: {p['request']['url']} (the page must work offline)")
    return out


def hover_problems(chrome, session, hover):
    """[problems] of hovering one point: no label, or a label without the words it must have."""
    div, curve, point, words = hover
    js = (f"Plotly.Fx.hover('{div}', [{{curveNumber: {curve}, pointNumber: {point}}}]); "
          f"(document.querySelector('#{div} .hoverlayer') || {{}}).textContent || ''")
    text = chrome.send("Runtime.evaluate", {"expression": js, "returnByValue": True},
                       session=session)["result"].get("value", "")
    print(f"hover {div} trace {curve} point {point}: {text!r}")
    return [f"hover on {div}: label {text!r} lacks {w!r}" for w in words if w not in text]


def check_page(chrome, path, shot, hover):
    """[problems] of one page; writes its screenshot to `shot`, then hovers one point."""
    target = chrome.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = chrome.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Page", "Network"):
        chrome.send(f"{domain}.enable", session=session)
    chrome.events.clear()
    chrome.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
    chrome.wait_event("Page.loadEventFired", 120)
    figs = drawn_figures(chrome, session)
    out = ["no plotly figure div in the page"] if not figs else []
    out += [f"figure {f['id']}: nothing drawn ({f['svgs']} .main-svg, {f['marks']} marks)"
            for f in figs if not f["svgs"] or not f["marks"]]
    height = screenshot(chrome, session, shot)
    out += hover_problems(chrome, session, hover)
    out += problems_of(chrome.events)  # everything the page said, the hover included
    print(f"{os.path.basename(path)}: {sum(1 for f in figs if f['svgs'])} of {len(figs)} figures drawn, "
          f"page {height} px high, screenshot {shot}")
    chrome.send("Target.closeTarget", {"targetId": target})
    return out


def drawn_figures(chrome, session, wait_s=60):
    """PLOTS_JS's answer once every figure div has its svg (plotly draws as the page's scripts
    run), or as it stands after wait_s."""
    figs, end = [], time.monotonic() + wait_s
    while time.monotonic() < end:
        figs = json.loads(chrome.send("Runtime.evaluate", {"expression": PLOTS_JS, "returnByValue": True},
                                      session=session)["result"]["value"])
        if figs and all(f["svgs"] for f in figs):
            break
        time.sleep(0.5)
    return figs


def screenshot(chrome, session, shot):
    """The whole page (up to MAX_HEIGHT) as a PNG at `shot`; returns the page's height."""
    size = chrome.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
    chrome.send("Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": min(int(size["height"]) + 1, MAX_HEIGHT),
                 "deviceScaleFactor": 1, "mobile": False}, session=session)
    png = chrome.send("Page.captureScreenshot", {"format": "png"}, session=session, timeout=120)["data"]
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png))
    return int(size["height"])


def rb_analysis(source, *argv):
    env = dict(os.environ, PYTHONPATH=os.path.join(source, "analysis"))
    r = subprocess.run([sys.executable, "-m", "ringbench_analysis"] + list(argv), env=env,
                       capture_output=True, text=True)
    print(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"FAIL: rb-analysis {argv[0]} exited {r.returncode}")


def real_run(args, work):
    """A run of the real program (host path, 2 ranks) on tests/analysis/analysis_small.yaml."""
    out = os.path.join(work, "small.h5")
    cmd = [args.mpiexec, "-np", "2", "--oversubscribe", args.ringbench,
           os.path.join(HERE, "analysis_small.yaml"), "--output", out, "--force"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(out):
        print(r.stdout[-3000:] + r.stderr[-3000:])
        sys.exit(f"FAIL: ringbench exited {r.returncode}: {' '.join(cmd)}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringbench", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    python_packages()
    exe = chromium()
    work = os.path.abspath(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rb_analysis(args.source, "report", real_run(args, work), "--out", os.path.join(work, "report"), "--html")
    sys.path[:0] = [HERE, os.path.join(args.source, "analysis")]
    import synthetic_store
    store = synthetic_store.make_store(os.path.join(work, "nights"))
    rb_analysis(args.source, "trend", store, "--out", os.path.join(work, "trend"), "--min-bytes", "0")
    chrome = Chrome(exe, os.path.join(work, "chromium-profile"))
    try:
        failed = {name: check_page(chrome, os.path.join(work, name, f"{name}.html"), os.path.join(work, f"{name}.png"),
                                   HOVERS[name]) for name in ("report", "trend")}
    finally:
        chrome.close()
    bad = [f"{name}.html: {p}" for name, ps in failed.items() for p in ps]
    for line in bad:
        print(f"FAIL: {line}")
    print("PASS" if not bad else f"FAIL: {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
