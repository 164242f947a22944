package sim

import "unicode"

// outputWords are the words the simulator streams. Each, with its leading
// space, is exactly one token under both cl100k_base and o200k_base, and a
// run of them tokenizes word by word (words_test.go checks both), so a
// client that counts streamed tokens locally gets the server's count.
var outputWords = [128]string{
	" the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " was",
	" with", " be", " by", " on", " not", " he", " this", " are", " or", " his", " from",
	" at", " which", " but", " have", " an", " had", " they", " you", " were", " their",
	" one", " all", " we", " can", " her", " has", " there", " been", " if", " more",
	" when", " will", " would", " who", " so", " no", " time", " water", " people", " year",
	" way", " day", " man", " world", " life", " hand", " part", " child", " eye", " woman",
	" place", " work", " week", " case", " point", " number", " group", " problem", " fact",
	" house", " light", " city", " home", " school", " river", " music", " paper", " story",
	" family", " night", " room", " game", " market", " road", " tree", " sun", " book",
	" food", " land", " power", " voice", " field", " table", " door", " head", " face",
	" name", " order", " line", " end", " side", " kind", " body", " word", " money",
	" state", " heart", " plan", " model", " page", " data", " rain", " stone", " wind",
	" wood", " fire", " color", " sea", " air", " sound", " form", " level", " area",
	" month", " mind", " short",
}

// outputWord is the word for output token i of request id: a deterministic
// hash, so the text does not depend on how requests interleave.
func outputWord(seed, id uint64, i int) string {
	return outputWords[splitmix(seed^splitmix(id)^uint64(i)*0xd6e8feb86659fd93)%uint64(len(outputWords))]
}

// appendWords appends the text of output tokens [first, first+n).
func appendWords(dst []byte, seed, id uint64, first, n int) []byte {
	for i := first; i < first+n; i++ {
		dst = append(dst, outputWord(seed, id, i)...)
	}
	return dst
}

// PromptTokens counts a prompt the way the simulator does: one token per
// whitespace-separated word, as strings.Fields splits (tokbench's synthetic prompts are built from
// words that are one token each).
func PromptTokens(text string) int {
	n := 0
	inWord := false
	for _, r := range text {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			n++
		}
		inWord = !space
	}
	return n
}

// Chat template overhead, after OpenAI's published counting rule for chat
// models: 3 tokens frame every message and 3 prime the reply.
const (
	chatTokensPerMessage = 3
	chatTokensPerReply   = 3
)
