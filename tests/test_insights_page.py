"""T2T Insights' page in a real browser: headless Chromium (Debian's
chromium and chromium-driver, which .ci/run installs) driven by selenium,
over the server on the README's tiny run, its newest checkpoint and the
average of its last five. The page gives the decoder's translation, draws the API's beam
graph node for node, shows the weight the model computed when a heatmap
cell is hovered, puts two runs side by side, and shows a bad query's
message while the server goes on.

With T2T_INSIGHTS_SCREENSHOTS=FOLDER it also writes the pictures of
docs/insights.md there (`python -m pytest --slow tests/test_insights_page.py
-n 0` with T2T_INSIGHTS_SCREENSHOTS=docs/images redraws them).
"""

import os
import pathlib
import shutil

import numpy as np
import pytest

from insights_serving import call, serving

pytestmark = pytest.mark.slow

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
SENTENCE = "A man in a blue shirt is riding a bike ."
SCREENSHOTS = os.environ.get("T2T_INSIGHTS_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and DRIVER):
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's chromium and chromium-driver (.ci/run installs them)")
        pytest.skip("no chromium and chromedriver here: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1500,2100", "--lang=en"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tiny_run):
    """(base URL, {label: RunInsights}, {label: (output_dir, checkpoint)}) of
    the server on the README's run twice: its newest checkpoint ("last") and
    the average of its last five ("averaged")."""
    from t2t_revival.insights.run_insights import RunInsights

    out_dir, _ = tiny_run
    [averaged] = sorted(pathlib.Path(out_dir, "averaged").glob("ckpt-*.index"))
    dirs = {"last": (str(out_dir), None), "averaged": (str(out_dir), str(averaged)[:-6])}
    runs = {label: RunInsights(label, path, checkpoint_path=checkpoint)
            for label, (path, checkpoint) in dirs.items()}
    with serving(runs) as url:
        yield url, runs, dirs


def _wait(driver, condition, seconds=120):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(lambda _: condition())


def _css(root, selector):
    from selenium.webdriver.common.by import By

    return root.find_elements(By.CSS_SELECTOR, selector)


def _query(driver, sentence, compare=""):
    """Type `sentence`, pick the compare run, press Translate, wait for the answer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    box = driver.find_element(By.ID, "sentence")
    box.clear()
    box.send_keys(sentence)
    Select(driver.find_element(By.ID, "compare-run")).select_by_value(compare)
    driver.find_element(By.ID, "translate").click()
    _wait(driver, lambda: driver.find_element(By.ID, "translate").is_enabled())


def _shoot(driver, name, element=None):
    """With T2T_INSIGHTS_SCREENSHOTS, the window (or `element`) as SCREENSHOTS/name."""
    if SCREENSHOTS:
        os.makedirs(SCREENSHOTS, exist_ok=True)
        path = os.path.join(SCREENSHOTS, name)
        driver.save_screenshot(path) if element is None else element.screenshot(path)


def _open(driver, url):
    from selenium.webdriver.common.by import By

    driver.get(url + "/")
    _wait(driver, lambda: len(_css(driver, "#run option")) == 2)
    assert driver.find_element(By.ID, "beam_size").get_attribute("value") == "4"


def test_the_page_translates_and_draws_the_search_and_the_attention(browser, site):
    from decoding import decoder_of
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url, runs, dirs = site
    _open(browser, url)
    _query(browser, SENTENCE)
    sections = _css(browser, "section.result")
    assert [s.get_attribute("data-run") for s in sections] == ["last"]
    section = sections[0]
    _shoot(browser, "insights_page.png")
    expected = decoder_of(*dirs["last"]).translate([SENTENCE])[0]
    assert expected.strip()
    assert _css(section, ".translation")[0].text == expected
    # The graph's nodes are the API's, with their states and scores.
    _, api = call(f"{url}/api/translate", {"run": "last", "sentence": SENTENCE})
    assert api["translation"] == expected
    drawn = {int(g.get_attribute("data-node")): g for g in _css(section, "svg.beam-graph g.node")}
    assert set(drawn) == {n["id"] for n in api["beam_graph"]["nodes"]}
    for node in api["beam_graph"]["nodes"]:
        g = drawn[node["id"]]
        assert g.get_attribute("data-state") == node["state"]
        assert int(g.get_attribute("data-step")) == node["step"]
        assert ("winner" in g.get_attribute("class").split()) == node["winner"]
        if node["score"] is not None:
            assert float(g.get_attribute("data-score")) == pytest.approx(node["score"], abs=1e-9)
    kept = {slot["node"] for entry in api["history"] for slot in entry["live"] + entry["finished"]}
    assert kept <= set(drawn)
    # The n-best list and the tokens.
    assert [li.find_element(By.CSS_SELECTOR, ".text").text for li in _css(section, ".nbest li")] \
        == [e["text"] for e in api["nbest"]]
    assert [int(p.get_attribute("data-id")) for p in _css(section, ".tokens-source .piece")] \
        == api["source"]["ids"]
    # Hovering a cell of head 1 of the last layer's encoder-decoder attention
    # shows the weight the model's layer computed.
    panel = _css(section, '.heatmap[data-kind="cross"]')[0]
    layers = len(api["attention"]["cross"])
    Select(panel.find_element(By.CSS_SELECTOR, "select.layer")).select_by_value(str(layers - 1))
    Select(panel.find_element(By.CSS_SELECTOR, "select.head")).select_by_value("1")
    model = runs["last"].trained.model
    output, padding = model.encode(np.array([api["source"]["ids"]], np.int32))
    _, weights = model.decode(np.array([api["target"]["ids"]], np.int32), output, padding,
                              return_attention=True)
    computed = np.asarray(weights["cross"])[0, layers - 1, 1]          # [T, S]
    row, col = np.unravel_index(np.argmax(computed), computed.shape)
    cell = panel.find_element(By.CSS_SELECTOR, f'rect.cell[data-row="{row}"][data-col="{col}"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    ActionChains(browser).move_to_element(cell).perform()
    tooltip = browser.find_element(By.ID, "tooltip")
    _wait(browser, tooltip.is_displayed, 10)
    shown = float(tooltip.text.split()[1])
    assert tooltip.text.startswith("weight ")
    assert abs(shown - computed[row, col]) <= 1e-6
    assert abs(float(cell.get_attribute("data-weight")) - computed[row, col]) <= 1e-6
    _shoot(browser, "insights_attention.png", panel.find_element(By.XPATH, ".."))
    # An early node of the winner's path, its tooltip inside the picture.
    path = sorted((n for n in api["beam_graph"]["nodes"] if n["winner"] and n["step"] >= 0),
                  key=lambda n: n["step"])
    node = drawn[path[min(3, len(path) - 1)]["id"]]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", node)
    ActionChains(browser).move_to_element(node).perform()
    _wait(browser, lambda: "log_prob" in tooltip.text, 10)
    _shoot(browser, "insights_beam_graph.png",
           section.find_element(By.CSS_SELECTOR, ".graph-block"))
    errors = [e for e in browser.get_log("browser")
              if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert not errors, errors


def test_two_runs_compare_side_by_side(browser, site):
    from decoding import decoder_of

    url, _, dirs = site
    _open(browser, url)
    _query(browser, SENTENCE, compare="averaged")
    sections = {s.get_attribute("data-run"): s for s in _css(browser, "section.result")}
    assert set(sections) == {"last", "averaged"}
    for label, section in sections.items():
        assert _css(section, ".translation")[0].text == \
            decoder_of(*dirs[label]).translate([SENTENCE])[0]
    left, right = sections["last"].rect, sections["averaged"].rect
    assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 5
    _shoot(browser, "insights_compare.png")


def test_a_bad_query_shows_its_message_and_the_page_goes_on(browser, site):
    from selenium.webdriver.common.by import By

    url, _, _ = site
    _open(browser, url)
    _query(browser, "   ")
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed() and "the sentence is empty" in error.text
    beam = browser.find_element(By.ID, "beam_size")
    beam.clear()
    beam.send_keys("zero")
    _query(browser, SENTENCE)
    assert error.is_displayed() and "beam_size" in error.text
    _shoot(browser, "insights_error.png")
    beam.clear()
    beam.send_keys("2")
    _query(browser, SENTENCE)
    assert not error.is_displayed()
    assert len(_css(browser, "section.result")) == 1
