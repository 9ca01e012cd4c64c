// Package watch will turn filesystem events under .snag/ into settled file
// changes for snagd: coalescing, atomic saves, overflow rescans and
// suppression of snag's own writes. It knows nothing of the index; the
// daemon connects the two. It holds no code yet.
package watch
