"""A screenshot of a running ``kueri serve`` page answering a question (docs/serve-page.png).

    kueri serve --corpus "$(kueri resources sample)" --port 8080 &
    python scripts/serve_screenshot.py --url http://127.0.0.1:8080/ --out docs/serve-page.png

Headless Chromium (Debian's ``chromium`` and ``chromium-driver``, through selenium), as the browser test drives it.
"""

from __future__ import annotations

import shutil
import urllib.parse
from collections.abc import Sequence

from kueri.cli.script import script_parser
from kueri.errors import SetupError


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8080/")
    parser.add_argument("--question", default="Which is better, a laptop or a desktop?")
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1500)
    parser.add_argument("--out", default="docs/serve-page.png")
    args = parser.parse_args(argv)
    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver_path:
        raise SetupError("no chromium and chromedriver: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
                     f"--window-size={args.width},{args.height}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.set_page_load_timeout(300)
        driver.get(args.url + "?" + urllib.parse.urlencode({"q": args.question, "k": args.k}))
        driver.save_screenshot(args.out)
    finally:
        driver.quit()
    return 0

