import Foundation
import ThreadlineCore
import Media

/// Turns live_photo items into what they show, before any work: the motion (a video item, looped
/// for `use: loop`) or the still (a photo item). A missing half is an error at the item. An
/// Android motion photo carries its motion inside the still (`MotionPhoto`): it is written out
/// once under `motionFolder` (the person's cache) and shown from there.
public enum LivePhotoResolver {
    /// Where the movies of Android motion photos are written out, by content.
    public static var motionFolder: String { Home.cacheFolder("threadline/motion-photos") }

    public static func resolve(_ pipeline: Pipeline) throws -> Pipeline {
        var p = pipeline
        var pruned = false
        for (i, item) in pipeline.items.enumerated() {
            guard case .livePhoto(let source, let use, let duration, let trim) = item.kind else { continue }
            guard !source.isRemote else {
                throw PipelineError("\(item.label(index: i)): live photos must be local files, to find their other half", at: item.location)
            }
            p.items[i].livePhoto = source
            let pair = LivePhotoPairing.pair(for: source.uri)
            let folder = (source.uri as NSString).deletingLastPathComponent
            switch use {
            case .motion, .loop, .bounce:
                var embedded: String? = nil
                if pair.movie == nil, let photo = pair.photo {
                    if !pruned { Home.prune(motionFolder, unusedFor: 30); pruned = true }
                    do { embedded = try MotionPhoto.extractMovie(from: photo, to: motionFolder) } catch {
                        throw PipelineError("\(item.label(index: i)): cannot write out the motion photo's movie under \(motionFolder): \(error.localizedDescription)",
                                            at: item.location, hint: "free space there, or set XDG_CACHE_HOME to a writable folder")
                    }
                }
                guard let movie = pair.movie ?? embedded else {
                    let how = pair.identifier.map { "no MOV in \(folder) carries its content identifier \($0) or its name" } ?? "no MOV in \(folder) has its name"
                    throw PipelineError("\(item.label(index: i)): cannot find the Live Photo's motion: \(how), and the photo holds none (as an Android motion photo does)",
                                        at: item.location, hint: "put the .MOV beside the photo, or add use: still to show the photo")
                }
                p.items[i].kind = .video(source: SourceRef(movie), trim: trim)
                if use == .loop { p.items[i].edits.loop = max(2, p.items[i].edits.loop) }
                if use == .bounce { p.items[i].edits.bounce = true }
            case .still:
                // The frame Photos shows: the movie's still-image-time, else the photo itself.
                if let movie = pair.movie, let t = LivePhotoPairing.stillImageTime(movie) {
                    p.items[i].kind = .photo(source: SourceRef(movie), duration: duration, kenBurns: nil)
                    p.items[i].frameAt = t
                    continue
                }
                guard let photo = pair.photo else {
                    throw PipelineError("\(item.label(index: i)): cannot find the Live Photo's still in \(folder)", at: item.location,
                                        hint: "put the photo beside the .MOV, or use: motion")
                }
                p.items[i].kind = .photo(source: SourceRef(photo), duration: duration, kenBurns: nil)
            }
        }
        return p
    }
}
