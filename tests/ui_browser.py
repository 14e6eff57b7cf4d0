"""The browser the UI lineage tests click through the Dagster UI with, and the moves a user makes in it.

Debian's chromium, driven by Selenium through Debian's chromedriver (`scripts/install_chromium.sh`
installs both; a test tool's own browser download does not work offline). Kept apart from the tests
so that they read as the clicks an auditor makes. `SABOT_UI_SCREENSHOTS=DIR` keeps the screenshots.
"""

import contextlib
import os
import tempfile
import time
from pathlib import Path

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
WAIT_S = 180  # the UI takes 15-22 s to answer a query on a busy 2-core machine


@contextlib.contextmanager
def chromium():
    """Debian's chromium, headless, driven through Debian's chromedriver; quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "Debian's chromium and chromium-driver are needed: bash scripts/install_chromium.sh"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="sabot-chromium-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _screens() -> Path | None:
    where = os.environ.get("SABOT_UI_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        return Path(where)
    return None


def screenshot(driver, name: str) -> None:
    """Keep what the browser shows as `name`, when SABOT_UI_SCREENSHOTS names a folder."""
    if where := _screens():
        driver.save_screenshot(str(where / name))


def wait_for(driver, xpath: str):
    """The element at `xpath`, once it is visible (up to WAIT_S)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=1).until(ec.visibility_of_element_located((By.XPATH, xpath)))


def open_page(driver, url: str) -> None:
    """Open a page; the first visit's community dialog is dismissed, as a user would."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    time.sleep(2)
    for skip in driver.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
        click(driver, skip)


def scroll_to(driver, element) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    time.sleep(0.5)


def click(driver, element) -> None:
    """Click as a user would; the UI's sticky header can cover the element for a moment after a scroll."""
    from selenium.common.exceptions import ElementClickInterceptedException

    for _ in range(5):
        scroll_to(driver, element)
        try:
            element.click()
            return
        except ElementClickInterceptedException:
            time.sleep(1)
    driver.execute_script("arguments[0].click();", element)  # still covered: the click the user would make lands on it


def metadata_link(driver, label: str) -> str:
    """The link of a metadata row of the open partition."""
    return wait_for(driver, f"//td[normalize-space()='{label}']/following-sibling::td//a").get_attribute("href")
