package notify

// SentSize is how many notifications the bus remembers as sent to this
// instance's streams.
func SentSize(b *Bus) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sent.at)
}

// SetSentMax bounds what the bus remembers as sent (0: the default).
func SetSentMax(b *Bus, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent.max = n
}
