//! Viewers: one WebDriver session each (fantoccini): capabilities, HTTP throttling (CDP),
//! navigation, playback start, periodic stats reads, teardown on every exit path.
