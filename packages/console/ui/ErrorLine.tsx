/** An error shown where the person acted (announced to assistive technology). */
export function ErrorLine({ error }: { error: string | null }) {
  return error ? (
    <div className="error" role="alert">
      {error}
    </div>
  ) : null;
}
