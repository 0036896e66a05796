import Foundation
import ThreadlineCore
internal import CFFmpeg

/// A song's section as 48 kHz stereo s16, decoded once and then looped (or followed by silence).
/// Decoding starts a second before the section and drops up to `from` by timestamp: decoders such
/// as MP3's give silence right after a seek. It stops after `needed` samples (the movie's length):
/// a section at least that long is never looped, and a 400 s song under a 75 s movie was 0.27 s
/// of decoding at the end of every render, four fifths of it thrown away.
final class SoundtrackReader {
    let soundtrack: Soundtrack
    let section: [Int16]
    /// Samples the movie needs: a section at least this long never loops.
    let needed: Int
    private var cursor = 0

    init(_ soundtrack: Soundtrack, needed: Int) throws {
        self.soundtrack = soundtrack
        self.needed = needed
        let name = (soundtrack.source as NSString).lastPathComponent
        let input = try InputFile(path: soundtrack.source, name: name, stage: .concat)
        guard let a = input.audioIndex else { throw MediaError(.concat, .permanent, file: name, "the soundtrack has no decodable audio") }
        let decoder = try Decoder(input: input, stream: a)
        let resampler = try Resampler(decoder: decoder, file: name)
        let preroll = max(0, soundtrack.from - 1)
        if preroll > 0 {
            input.seek(to: preroll)
        }
        let sectionLength = soundtrack.to.map { Int((($0 - soundtrack.from) * Double(Timing.sampleRate)).rounded()) }
        let limit = min(sectionLength ?? Int.max, max(1, needed))
        var out: [Int16] = []
        var skip: Int? = nil
        let packet = Packet(), frame = Frame()
        /// Drops what lies before `from` (the resampler's last samples too: a `from` past the
        /// song's end leaves nothing, not the resampler's tail).
        func dropBeforeFrom() {
            guard let s = skip, s > 0 else { return }
            let drop = min(s, out.count / 2)
            out.removeFirst(drop * 2)
            skip = s - drop
        }
        func take() throws {
            while avcodec_receive_frame(decoder.ctx, frame.ptr) >= 0 {
                if skip == nil {
                    let ts = frame.ptr.pointee.best_effort_timestamp
                    let t = ts == tl_nopts_value() ? preroll : Double(ts) * av_q2d(decoder.timeBase) - input.origin
                    skip = max(0, Int(((soundtrack.from - t) * Double(Timing.sampleRate)).rounded()))
                }
                try resampler.convert(frame.ptr, into: &out)
                frame.unref()
                dropBeforeFrom()
            }
        }
        while out.count / 2 < limit {
            let ret = av_read_frame(input.ctx, packet.ptr)
            if ret < 0 { avcodec_send_packet(decoder.ctx, nil); try take(); try resampler.convert(nil, into: &out); dropBeforeFrom(); break }
            defer { packet.unref() }
            guard packet.ptr.pointee.stream_index == a else { continue }
            if avcodec_send_packet(decoder.ctx, packet.ptr) < 0 { continue }   // a damaged packet of music: skip it
            try take()
        }
        if out.count / 2 > limit { out.removeLast(out.count - limit * 2) }
        guard !out.isEmpty else {
            throw MediaError(.concat, .permanent, file: name, String(format: "the soundtrack's section from %.3f s is empty: the song is %.3f s long",
                                                                     soundtrack.from, input.duration))
        }
        section = out
    }

    /// Samples over which a looped section's end crossfades into its start: 10 ms. A cut there
    /// was the largest step in the whole waveform, a click at every repeat.
    static let seamSamples = Timing.sampleRate / 100

    /// What each repeat after the first plays: the seam (the section's last samples crossfaded
    /// into its first), then the section from there to where its next seam begins. The first
    /// pass plays up to its first seam. Empty: the section does not loop (or covers the movie,
    /// so never repeats: it is then heard whole, to its last sample), or is too short to
    /// crossfade (a quarter of it at most), and repeats as it is.
    private lazy var repeatBody: [Int16] = {
        let n = section.count / 2, k = min(Self.seamSamples, n / 4)
        guard soundtrack.loop, n < needed, k > 0 else { return [] }
        var body = [Int16](repeating: 0, count: 2 * (n - k))
        for j in 0..<k {
            let w = (Double(j) + 0.5) / Double(k)
            for c in 0..<2 {
                body[2 * j + c] = Int16(clamping: Int((Double(section[2 * (n - k + j) + c]) * (1 - w) + Double(section[2 * j + c]) * w).rounded()))
            }
        }
        body.replaceSubrange((2 * k)..<(2 * (n - k)), with: section[(2 * k)..<(2 * (n - k))])
        return body
    }()
    private var repeating = false

    /// The next `n` interleaved stereo samples: the section, looped (crossfaded at each seam) or
    /// followed by silence.
    func read(_ n: Int) -> [Int16] {
        var out: [Int16] = []
        out.reserveCapacity(n * 2)
        while out.count < n * 2 {
            let source = repeating ? repeatBody : section
            // The first pass stops where the first seam begins; a section that cannot crossfade plays whole.
            let end = repeating || repeatBody.isEmpty ? source.count : repeatBody.count
            if cursor >= end {
                guard soundtrack.loop else { out.append(contentsOf: repeatElement(0, count: n * 2 - out.count)); break }
                repeating = !repeatBody.isEmpty
                cursor = 0
                continue
            }
            let take = min(end - cursor, n * 2 - out.count)
            out.append(contentsOf: source[cursor..<(cursor + take)])
            cursor += take
        }
        return out
    }
}

/// Mixes the soundtrack into the movie's audio as concat writes it.
final class SoundtrackMixer {
    let soundtrack: Soundtrack
    let reader: SoundtrackReader
    let totalSamples: Int
    var position = 0

    /// Samples the music plays for: the movie, or a section that does not loop and ends first.
    let musicSamples: Int

    init(_ soundtrack: Soundtrack, totalSamples: Int) throws {
        self.soundtrack = soundtrack
        reader = try SoundtrackReader(soundtrack, needed: totalSamples)
        self.totalSamples = totalSamples
        musicSamples = soundtrack.loop ? totalSamples : min(totalSamples, reader.section.count / 2)
    }

    /// `clip` (n interleaved stereo samples) becomes clip × clip_audio + music × volume × fades.
    /// The fades belong to the music as it is heard (`Soundtrack.mixing`): the fade-out ends
    /// where the music does (a section that stops before the movie was cut off at full volume),
    /// and neither fade is longer than the music (a 30 s fade-out under a 7 s movie started 23 s
    /// before it, so the music was never heard at its volume).
    func mix(_ clip: UnsafeRawPointer, samples n: Int) throws -> [Int16] {
        let music = reader.read(n)
        let src = clip.assumingMemoryBound(to: Int16.self)
        let heard = Double(musicSamples)
        let fadeIn = min(soundtrack.fadeIn * Double(Timing.sampleRate), heard), fadeOut = min(soundtrack.fadeOut * Double(Timing.sampleRate), heard)
        var out = [Int16](repeating: 0, count: n * 2)
        out.withUnsafeMutableBufferPointer { o in
            music.withUnsafeBufferPointer { m in
                for i in 0..<n {
                    let p = Double(position + i)
                    var g = soundtrack.volume
                    if fadeIn > 0 && p < fadeIn { g *= p / fadeIn }
                    let remaining = heard - p
                    if fadeOut > 0 && remaining < fadeOut { g *= max(0, remaining / fadeOut) }
                    for c in 0..<2 {
                        let v = Double(src[2 * i + c]) * soundtrack.clipAudio + Double(m[2 * i + c]) * g
                        o[2 * i + c] = Int16(clamping: Int(v.rounded()))
                    }
                }
            }
        }
        position += n
        return out
    }
}
