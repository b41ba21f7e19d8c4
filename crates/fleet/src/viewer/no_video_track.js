// viewerfleet's decode lever, installed before the page's own scripts with the stats probe
// (CDP Page.addScriptToEvaluateOnNewDocument): deselect the video track of every <video> as
// soon as its tracks are known. Chromium then stops decoding and painting video after the
// first few frames, while the player keeps fetching and appending exactly as before: Media
// Source appends, buffered ranges, the (audio-driven) media clock, hls.js's ABR and the P2P
// engine are untouched (BENCHMARKS.md measures it). Needs the Chromium flag
// --enable-blink-features=AudioVideoTracks, which exposes HTMLMediaElement.videoTracks;
// without it this script only records that the API is missing (window.__vfTrack.api).
(() => {
  if (window.__vfTrack) return;
  const state = window.__vfTrack = { api: null, deselected: 0, silent: false };
  const off = (video) => {
    const tracks = video.videoTracks;
    state.api = !!tracks;
    if (!tracks) return;
    // Without an audio track the video track is what drives the media clock: deselected,
    // playback would stop at 0 s. Such media (a silent stream) is decoded as before; once an
    // audio track is known (a later loadedmetadata or track change), the video goes off.
    if (video.audioTracks && video.audioTracks.length === 0) { state.silent = true; return; }
    state.silent = false;
    for (let i = 0; i < tracks.length; i++) {
      if (tracks[i].selected) { tracks[i].selected = false; state.deselected += 1; }
    }
  };
  const isVideo = (e) => e.target instanceof HTMLVideoElement;
  // A new init segment (a rendition switch) may add a track, selected again: watch the list.
  const watch = (video) => {
    const tracks = video.videoTracks;
    if (!tracks || video.__vfTrackWatched) return;
    video.__vfTrackWatched = true;
    tracks.addEventListener('addtrack', () => off(video));
    tracks.addEventListener('change', () => off(video));
  };
  document.addEventListener('loadstart', (e) => { if (isVideo(e)) watch(e.target); }, true);
  document.addEventListener('loadedmetadata', (e) => { if (isVideo(e)) { watch(e.target); off(e.target); } }, true);
  document.addEventListener('loadeddata', (e) => { if (isVideo(e)) off(e.target); }, true);
})();
