#!/usr/bin/env python3
"""Drives the merchant dashboard in headless Chromium, as a merchant would use it.

Chromium is controlled over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
messages ending in NUL on file descriptors 3 and 4), so nothing listens on a port and only
Python's standard library is needed. Every step checks the text the page must show; a
screenshot (PNG) of every page goes to the output folder. Exit status 0 only when every step
passed.

  dashboard_browser.py --url http://127.0.0.1:PORT --email E --password-file F --output DIR \
      --amount "12.50 EUR" --total "14.00 EUR" --terminal-label "Till 1" [--refund] \
      [--readme-shot docs/dashboard.png]
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


class Failure(Exception):
    pass


class Browser:
    """One headless Chromium and one page, over the DevTools pipe."""

    def __init__(self, width=1280, height=800):
        self.profile = tempfile.mkdtemp(prefix="horizon-chromium.")
        to_chrome_read, to_chrome_write = os.pipe()
        from_chrome_read, from_chrome_write = os.pipe()
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        if binary is None:
            raise Failure("chromium is not installed (Tools/lib/setup.sh installs the Debian package)")
        arguments = [
            binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-sync", "--hide-scrollbars", "--user-data-dir=" + self.profile,
            "--window-size=%d,%d" % (width, height), "about:blank",
        ]
        # Chromium's sandbox refuses to run as root (CI runs as root).
        if os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")

        def descriptors():
            # The protocol's fixed descriptors: Chromium reads commands on 3 and writes on 4.
            # Copied first, because the pipe itself may already sit on 3 or 4, and dup2 onto
            # itself would keep its close-on-exec flag (Python's pipes are not inheritable).
            read_end, write_end = os.dup(to_chrome_read), os.dup(from_chrome_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        # close_fds=False: Python closes unlisted descriptors after preexec_fn, which would
        # close 3 and 4 again; the pipe's other ends are closed in the parent below.
        self.process = subprocess.Popen(
            arguments, close_fds=False, preexec_fn=descriptors,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.profile, "chromium.log"), "w"))
        os.close(to_chrome_read)
        os.close(from_chrome_write)
        self.writer = os.fdopen(to_chrome_write, "wb", buffering=0)
        self.reader = os.fdopen(from_chrome_read, "rb", buffering=0)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None
        self.width, self.height, self.mobile = width, height, False
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.resize(width, height)

    def resize(self, width, height, mobile=False):
        """The viewport of a desktop window, or of a phone (mobile: its viewport meta tag counts)."""
        self.width, self.height, self.mobile = width, height, mobile
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise Failure("Chromium did not answer in time")
            chunk = self.reader.read(65536)
            if not chunk:
                raise Failure("Chromium closed the DevTools pipe (exit status %s)" % self.process.poll())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self.writer.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method:
                    del self.events[: index + 1]
                    return event
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise Failure("the page's script failed: %s" % result["exceptionDetails"].get("text"))
        return result["result"].get("value")

    def open(self, url):
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for_event("Page.loadEventFired")

    def submit(self, expression):
        """Runs `expression` (which submits a form) and waits for the page it leads to."""
        self.events.clear()
        self.evaluate(expression)
        self.wait_for_event("Page.loadEventFired")

    def text(self):
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path):
        height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or self.height
        height = max(self.height, min(int(height), 4000))
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": self.mobile})
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": self.mobile})
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))


def js_string(text):
    return json.dumps(text)


def answer_challenge(url, output):
    """A card's 3-D Secure challenge, as a person answers it: open the link the wallet printed,
    approve, and see the page that hands MD and PaRes back to the wallet."""
    browser = Browser()
    try:
        print("3-D Secure | opening the challenge the wallet printed", flush=True)
        browser.open(url)
        page = browser.text()
        browser.screenshot(os.path.join(output, "3ds-1-challenge.png"))
        if "3-D Secure sandbox" not in page:
            raise Failure("expected the challenge page; it shows:\n%s" % page[:1500])
        print("3-D Secure | approving", flush=True)
        browser.submit("document.getElementById('approve').click()")
        page = browser.text()
        browser.screenshot(os.path.join(output, "3ds-2-approved.png"))
        if "approved" not in page:
            raise Failure("expected the issuer's approval after approving; it shows:\n%s" % page[:1500])
        print("3-D Secure | continuing to the wallet's term page", flush=True)
        browser.submit("document.getElementById('continue').click()")
        page = browser.text()
        browser.screenshot(os.path.join(output, "3ds-3-finished.png"))
        if "3-D Secure finished" not in page:
            raise Failure("expected the finished page after approving; it shows:\n%s" % page[:1500])
        if not browser.evaluate("document.getElementById('PaRes') && document.getElementById('PaRes').value"):
            raise Failure("the finished page carries no PaRes for the wallet")
    except Failure as failure:
        print("3-D Secure | FAILED: %s" % failure, file=sys.stderr, flush=True)
        browser.close()
        return 1
    browser.close()
    print("3-D Secure | the challenge was answered in the browser", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--challenge-url", help="only answer this 3-D Secure challenge (approve) and check its pages")
    parser.add_argument("--url")
    parser.add_argument("--email")
    parser.add_argument("--password-file")
    parser.add_argument("--output", required=True)
    parser.add_argument("--amount", help='the payment as the dashboard shows it, e.g. "12.50 EUR"')
    parser.add_argument("--total", help='amount plus tip, what a full refund gives back, e.g. "14.00 EUR"')
    parser.add_argument("--terminal-label")
    parser.add_argument("--refund", action="store_true", help="refund the payment from its row and check it")
    parser.add_argument("--readme-shot", help="also write the transactions page here (the picture in docs/dashboard.md)")
    options = parser.parse_args()
    os.makedirs(options.output, exist_ok=True)
    if options.challenge_url:
        return answer_challenge(options.challenge_url, options.output)
    missing = [name for name in ("url", "email", "password_file", "amount", "total", "terminal_label")
               if getattr(options, name) is None]
    if missing:
        parser.error("the dashboard check needs " + ", ".join("--" + name.replace("_", "-") for name in missing))
    with open(options.password_file) as file:
        password = file.read().rstrip("\n")
    os.makedirs(options.output, exist_ok=True)
    base = options.url.rstrip("/")
    browser = Browser()
    passed = 0
    step_name = "starting"

    def step(name):
        nonlocal step_name
        step_name = name
        print("dashboard | " + name, flush=True)

    def expect(*texts, screenshot=None):
        nonlocal passed
        page = browser.text()
        if screenshot:
            browser.screenshot(os.path.join(options.output, screenshot))
        for text in texts:
            if text not in page:
                raise Failure("expected %r on the page; it shows:\n%s" % (text, page[:1500]))
        passed += 1

    def fits(name):
        """Nothing is wider than the window (no sideways scrolling) and every amount cell is
        on screen: a phone's check."""
        overflow = browser.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if overflow is None or overflow > 1:
            raise Failure("%s scrolls sideways by %s px at %d px" % (name, overflow, browser.width))
        hidden = browser.evaluate(
            "Array.from(document.querySelectorAll('td[data-label=Amount], dd.num')).filter(function (cell) {"
            " var box = cell.getBoundingClientRect(); var style = getComputedStyle(cell);"
            " return box.width <= 0 || box.height <= 0 || box.right > window.innerWidth + 1 || box.left < -1"
            " || style.visibility === 'hidden' || style.display === 'none'; }).length")
        if hidden:
            raise Failure("%s hides %s amount cell(s) at %d px" % (name, hidden, browser.width))

    def csv(path):
        """The export as a browser downloads it: with the session cookie (the page's policy lets
        no script fetch it)."""
        cookies = browser.call("Network.getCookies", {"urls": [base + "/dashboard/"]}).get("cookies", [])
        header = "; ".join("%s=%s" % (cookie["name"], cookie["value"]) for cookie in cookies)
        request = urllib.request.Request(base + path, headers={"Cookie": header})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.headers.get("Content-Type"), response.headers.get("Content-Disposition"), \
                response.read().decode("utf-8")

    try:
        step("an unsigned visit is sent to the sign-in page")
        browser.open(base + "/dashboard/transactions")
        expect("Sign in", "E-mail", "Password", screenshot="desktop-01-sign-in.png")
        if not browser.evaluate("location.pathname") == "/dashboard/sign-in":
            raise Failure("not redirected to /dashboard/sign-in")

        step("a wrong password is refused")
        browser.submit(
            "document.getElementById('email').value = %s; document.getElementById('password').value = 'wrong';"
            "document.querySelector('main form button[type=submit]').click()" % js_string(options.email))
        expect("The e-mail or the password is wrong.", screenshot="desktop-02-sign-in-refused.png")

        step("signing in opens the home page: today's sales, this week's, and the chart")
        browser.submit(
            "document.getElementById('email').value = %s; document.getElementById('password').value = %s;"
            "document.querySelector('main form button[type=submit]').click()"
            % (js_string(options.email), js_string(password)))
        expect("Home", "Today", "This week", options.total, "1 payment", "Sales per day", "Sign out",
               screenshot="desktop-03-home.png")
        if browser.evaluate("location.pathname") != "/dashboard/home":
            raise Failure("signing in did not open /dashboard/home")
        bars = browser.evaluate("document.querySelectorAll('figure.chart svg rect.bar').length")
        if bars != 14:
            raise Failure("the chart has %s bars, not 14 (one per day)" % bars)
        if browser.evaluate("document.scripts.length") != 0:
            raise Failure("the home page carries a script")

        step("the session cookie is HttpOnly and SameSite")
        cookies = browser.call("Network.getCookies", {"urls": [base + "/dashboard/"]}).get("cookies", [])
        session = [cookie for cookie in cookies if cookie["name"] == "horizon_session"]
        if not session or not session[0]["httpOnly"] or session[0].get("sameSite") not in ("Lax", "Strict"):
            raise Failure("the session cookie is missing or not HttpOnly/SameSite: %s" % cookies)
        if browser.evaluate("document.cookie").find("horizon_session") >= 0:
            raise Failure("a script can read the session cookie")

        step("the transactions list shows the payment made over the simulated radio")
        browser.open(base + "/dashboard/transactions")
        expect("Transactions", options.amount, "approved", options.terminal_label, screenshot="desktop-04-transactions.png")
        if options.readme_shot:
            browser.screenshot(options.readme_shot)

        step("filters: payments from today, the register user, a type with no transactions")
        today = time.strftime("%Y-%m-%d", time.gmtime())
        browser.open(base + "/dashboard/transactions?type=payment&from=%s&to=%s" % (today, today))
        expect(options.amount)
        browser.open(base + "/dashboard/transactions?register_user=anna")
        expect(options.amount, "anna")
        browser.open(base + "/dashboard/transactions?type=coupon")
        expect("No transactions match.")

        step("a reversed date range is explained on the same page")
        browser.open(base + "/dashboard/transactions?from=2030-01-02&to=2030-01-01")
        expect("“From” (2030-01-02) is after “To” (2030-01-01)", "Search", screenshot="desktop-05-bad-range.png")

        step("the payment's page: receipt, terminal, an empty refund box")
        browser.open(base + "/dashboard/transactions")
        browser.submit("document.querySelector('td[data-label=\"Ref.\"] a').click()")
        expect("Payment id", options.amount, options.total, options.terminal_label, "anna",
               "No refunds.", screenshot="desktop-06-payment.png")
        payment_id = browser.evaluate("document.querySelector('code.id').textContent")
        reference = browser.evaluate("location.pathname.split('/').pop()")
        if browser.evaluate("document.getElementById('amount').value") != "":
            raise Failure("the refund box is not empty")

        step("search by payment id, reference and amount")
        for query in (payment_id, reference, options.total.split(" ")[0]):
            browser.open(base + "/dashboard/transactions?q=" + urllib.parse.quote(query))
            expect(options.amount)
            if browser.evaluate("document.querySelectorAll('tbody tr').length") != 1:
                raise Failure("searching for %r did not find exactly the payment" % query)
        browser.open(base + "/dashboard/transactions?q=" + urllib.parse.quote(payment_id))
        browser.screenshot(os.path.join(options.output, "desktop-07-search.png"))

        step("the CSV export of the list")
        kind, disposition, text = csv("/dashboard/transactions.csv?type=payment")
        lines = [line for line in text.split("\r\n") if line]
        if kind != "text/csv; charset=utf-8" or "attachment" not in (disposition or ""):
            raise Failure("the export is not a CSV download: %s, %s" % (kind, disposition))
        if not lines or not lines[0].startswith("reference,payment_id,time") or len(lines) != 2:
            raise Failure("the CSV export is not the one payment with its header: %r" % lines)
        if payment_id not in lines[1] or options.total.split(" ")[0] not in lines[1]:
            raise Failure("the CSV line does not name the payment and its total: %r" % lines[1])
        passed += 1

        if options.refund:
            step("refunding the payment from its page, after confirming")
            browser.open(base + "/dashboard/transactions/" + reference)
            browser.submit(
                "document.getElementById('amount').value = %s; document.querySelector('form.refund button').click()"
                % js_string(options.total.split(" ")[0]))
            expect("Confirm the refund", "Refund " + options.total, "cannot be undone",
                   screenshot="desktop-08-refund-confirm.png")
            browser.submit("document.querySelector('form.confirm button').click()")
            expect("The refund was made.", "refunded " + options.total, screenshot="desktop-09-refunded.png")
            if browser.evaluate("document.querySelectorAll('form.refund').length") != 0:
                raise Failure("the fully refunded payment still offers a refund")

        step("register users: add one; the form checks the id as the API does")
        browser.open(base + "/dashboard/register-users")
        if browser.evaluate("document.getElementById('id').pattern") != "[A-Za-z0-9._:\\-]{1,64}":
            raise Failure("the id field does not carry the API's rule as its pattern")
        browser.evaluate("document.getElementById('id').value = 'alex till'")
        if browser.evaluate("document.getElementById('id').checkValidity()"):
            raise Failure("the browser accepts an id with a space, which the API refuses")
        browser.submit(
            "document.getElementById('id').value = 'alex-till';"
            "document.getElementById('name').value = 'Alex at the till';"
            "document.querySelector('form.card button').click()")
        expect("The register user was added.", "alex-till", "Alex at the till",
               screenshot="desktop-10-register-users.png")

        step("a form with a wrong CSRF token is refused")
        browser.submit(
            "document.querySelector('form.card input[name=csrf]').value = 'forged';"
            "document.getElementById('id').value = 'mallory';"
            "document.getElementById('name').value = 'Mallory';"
            "document.querySelector('form.card button').click()")
        expect("This form has expired", "nothing was changed", screenshot="desktop-11-csrf-refused.png")
        browser.open(base + "/dashboard/register-users")
        if "Mallory" in browser.text():
            raise Failure("the forged form added a register user")

        step("register users: remove one, after confirming")
        browser.submit("document.querySelector('button[aria-label=\"Remove Alex at the till\"]').click()")
        expect("Remove the register user Alex at the till (alex-till)?", screenshot="desktop-12-remove-confirm.png")
        browser.submit("document.querySelector('form.confirm button').click()")
        expect("The register user was removed.", "No register users yet.")

        step("terminals: the activated terminal, named as on the transactions, leads to its payments")
        browser.open(base + "/dashboard/terminals")
        expect(options.terminal_label, "active", "Revoke", screenshot="desktop-13-terminals.png")
        browser.submit("document.querySelector('td[data-label=Label] a').click()")
        expect(options.amount, "Only the payments of terminal")

        step("programs: the bonus rule, memberships and coupons")
        browser.open(base + "/dashboard/programs")
        expect("Bonus points", "Gold memberships", "Coupons", screenshot="desktop-14-programs.png")
        browser.submit(
            "document.getElementById('points').value = '3'; document.querySelector('form.card button').click()")
        expect("The bonus rule was saved", "Payments earn 3 bonus points per whole")

        step("settings: the merchant's time zone, then used for the times shown")
        browser.open(base + "/dashboard/settings")
        browser.submit(
            "document.getElementById('time_zone').value = 'Europe/Berlin'; document.querySelector('form.card button').click()")
        expect("The time zone was saved", "Europe/Berlin", screenshot="desktop-15-settings.png")
        browser.open(base + "/dashboard/transactions")
        expect("Time (Europe/Berlin)", options.amount)

        step("webhooks: no endpoint yet; an address on a private network is refused, saying why")
        browser.open(base + "/dashboard/webhooks")
        expect("No webhook endpoint yet", "Add the endpoint", "payment.succeeded",
               screenshot="desktop-15-webhooks.png")
        browser.submit(
            "document.getElementById('url').value = 'https://192.168.1.10/hooks';"
            " document.querySelector('input[name=event_payment_succeeded]').checked = true;"
            " document.querySelector('form.card button').click()")
        expect("That address cannot receive webhooks", "private address", "No webhook endpoint yet")

        step("a phone's width (390 px): every page fits and keeps its amounts")
        browser.resize(390, 844, mobile=True)
        for name, path in (("home", "/dashboard/home"), ("transactions", "/dashboard/transactions"),
                           ("payment", "/dashboard/transactions/" + reference),
                           ("register-users", "/dashboard/register-users"), ("terminals", "/dashboard/terminals"),
                           ("programs", "/dashboard/programs"), ("settings", "/dashboard/settings"),
                           ("webhooks", "/dashboard/webhooks")):
            browser.open(base + path)
            expect(screenshot="phone-%s.png" % name)
            fits(name)
        browser.open(base + "/dashboard/transactions")
        expect(options.amount, "Amount")
        visible = browser.evaluate(
            "(function () { var cell = document.querySelector('td[data-label=Amount]');"
            " return cell ? cell.innerText : ''; })()")
        if options.amount not in (visible or ""):
            raise Failure("the amount is not shown on a phone: %r" % visible)
        browser.resize(1280, 800)

        step("signing out ends the session")
        browser.submit("document.querySelector('form.sign-out button').click()")
        expect("You are signed out.", screenshot="desktop-16-signed-out.png")
        browser.open(base + "/dashboard/transactions")
        if browser.evaluate("location.pathname") != "/dashboard/sign-in":
            raise Failure("after sign-out the transactions page did not send to the sign-in page")
        passed += 1
    except Failure as failure:
        print("dashboard | FAILED at '%s': %s" % (step_name, failure), file=sys.stderr, flush=True)
        try:
            browser.screenshot(os.path.join(options.output, "failed.png"))
        except Exception:
            pass
        browser.close()
        return 1
    browser.close()
    print("dashboard | %d checks passed; screenshots in %s" % (passed, options.output), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
