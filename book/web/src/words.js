// The widget's words, in the language of the page (<html lang>): the English book, or the Traditional
// Chinese (Taiwan) one under zh-TW/. Only the interface is translated: the models were trained on
// English addresses and answer in English, which the zh-TW page says above the widget.

const WORDS = {
  en: {
    tabs: { "fill-mask": "Fill the blank", "next-words": "Next words", attention: "Attention" },
    oneBlank: "Write one blank, as ___ or [MASK].",
    tooLong: (n) => `The text is too long: at most ${n} tokens.`,
    blankAria: "A sentence with one blank",
    typeBlank: (a, b) => ["Type a sentence with one blank (", a, " or ", b, "):"],
    bothSides: (m) => `${m} reads both sides of the blank`,
    beforeOnly: (m) => `${m} reads only the text before it`,
    builtExample: "Computed when the book was built. Type to run the models in your browser.",
    running: "Running…",
    loading: "Loading the models…",
    loadingOne: (m) => `Loading ${m}…`,
    answered: (a, aMs, b, bMs) => `${a} answered in ${aMs} ms, ${b} in ${bMs} ms, in your browser.`,
    nothingBefore: (m) => ` Nothing comes before the blank, so ${m} read only the start of a document ([SEP]).`,
    continueAria: "The text to continue",
    temperature: "temperature",
    continueButton: "Continue the text",
    oneSample: (t, k) => `One sample, drawn when the book was built (temperature ${t}, top-k ${k}). ` +
      "Press the button to sample in your browser.",
    writing: "Writing…",
    eachPress: "Each press draws another sample. Temperature 0 always takes the most probable token.",
    typeStart: "Type the start of a text:",
    sentenceAria: "A sentence",
    layerAria: "layer",
    layer: (i) => `layer ${i}`,
    headAria: "head",
    head: (i) => `head ${i}`,
    meanHeads: "mean of the heads",
    typeThenPoint: "Type a sentence, then point at a square: row = the position reading, column = the position read.",
    point: "Point at a square: row = the position reading, column = the position read.",
    reads: (a, b, w) => `“${a}” reads “${b}” with weight ${w}`,
    typeSentence: "Type a sentence:",
    drawMaps: "Draw the maps",
    leftOnly: (m) => `reads its left only (${m})`,
    bothSidesMap: (m) => `reads both sides (${m})`,
  },
  "zh-TW": {
    tabs: { "fill-mask": "填空", "next-words": "接下來的詞", attention: "注意力" },
    oneBlank: "請寫一處空格，寫成 ___ 或 [MASK]。",
    tooLong: (n) => `文字太長：最多 ${n} 個詞元。`,
    blankAria: "有一處空格的句子",
    typeBlank: (a, b) => ["輸入一個有一處空格的英文句子（", a, " 或 ", b, "）："],
    bothSides: (m) => `${m} 讀空格的兩側`,
    beforeOnly: (m) => `${m} 只讀空格之前的文字`,
    builtExample: "這是建置本書時算出的結果。輸入文字，模型就會在你的瀏覽器中執行。",
    running: "執行中…",
    loading: "正在載入模型…",
    loadingOne: (m) => `正在載入 ${m}…`,
    answered: (a, aMs, b, bMs) => `${a} 用了 ${aMs} 毫秒，${b} 用了 ${bMs} 毫秒，都在你的瀏覽器中作答。`,
    nothingBefore: (m) => `空格之前沒有任何文字，所以 ${m} 只讀到文件的開頭（[SEP]）。`,
    continueAria: "要接著寫下去的文字",
    temperature: "溫度",
    continueButton: "接著寫下去",
    oneSample: (t, k) => `建置本書時抽出的一個樣本（溫度 ${t}，top-k ${k}）。按下按鈕，就會在你的瀏覽器中抽樣。`,
    writing: "寫作中…",
    eachPress: "每按一次就抽出另一個樣本。溫度為 0 時，永遠取機率最高的詞元。",
    typeStart: "輸入一段英文文字的開頭：",
    sentenceAria: "一個句子",
    layerAria: "層",
    layer: (i) => `第 ${i} 層`,
    headAria: "注意力頭",
    head: (i) => `第 ${i} 個頭`,
    meanHeads: "各頭的平均",
    typeThenPoint: "輸入一個英文句子，再指向一個方格：列是進行讀取的位置，欄是被讀取的位置。",
    point: "指向一個方格：列是進行讀取的位置，欄是被讀取的位置。",
    reads: (a, b, w) => `「${a}」以權重 ${w} 讀取「${b}」`,
    typeSentence: "輸入一個英文句子：",
    drawMaps: "畫出注意力圖",
    leftOnly: (m) => `只讀左側（${m}）`,
    bothSidesMap: (m) => `讀兩側（${m}）`,
  },
};

export const LANGUAGES = Object.keys(WORDS);

// The words for `lang` (an <html lang> value such as "en", "zh-TW" or "zh_TW"): English unless it is Chinese.
export function words(lang = document.documentElement.lang) {
  return (lang || "").toLowerCase().startsWith("zh") ? WORDS["zh-TW"] : WORDS.en;
}
